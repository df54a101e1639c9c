import { Controller, HttpCode, Post, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { AuthenticatedSession } from '@app/sessions';
import { UploadsService } from '@app/uploads';
import { UPLOAD_FIELD, UploadFilesInterceptor } from '../uploads/upload-files.interceptor';
import { UploadResponseDto } from '../uploads/upload.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

/**
 * Reference uploads for a signed-in holder, as POST /v1/uploads: the new-batch page needs
 * them, and a holder on the free plan has no key that could upload.
 */
@ApiTags('Dashboard')
@Controller('dashboard/uploads')
export class DashboardUploadsController {
  constructor(private readonly uploads: UploadsService) {}

  @Post()
  @HttpCode(200)
  @SessionAuth()
  @UseInterceptors(UploadFilesInterceptor)
  @ApiOperation({ operationId: 'uploadDashboardFiles', summary: 'Upload reference images (free), as POST /v1/uploads' })
  @ApiConsumes('multipart/form-data')
  @ApiBody({
    schema: {
      type: 'object',
      required: [UPLOAD_FIELD],
      properties: { [UPLOAD_FIELD]: { type: 'array', items: { type: 'string', format: 'binary' } } },
    },
  })
  @ApiOkResponse({ type: UploadResponseDto })
  async upload(
    @CurrentSession() auth: AuthenticatedSession,
    @UploadedFiles() files: Express.Multer.File[] | undefined,
  ): Promise<UploadResponseDto> {
    const stored = await this.uploads.store(
      auth.account.id,
      (files ?? []).map((f) => ({ name: f.originalname, path: f.path, bytes: f.size })),
    );
    return UploadResponseDto.from(stored);
  }
}

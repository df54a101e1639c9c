import { Controller, HttpCode, Post, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedKey } from '@app/keys';
import { UPLOAD_LIMITS, UploadsService } from '@app/uploads';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { UPLOAD_FIELD, UploadFilesInterceptor } from './upload-files.interceptor';
import { UploadResponseDto } from './upload.response.dto';

@ApiTags('Public API')
@Controller('uploads')
export class UploadsController {
  constructor(private readonly uploads: UploadsService) {}

  @Post()
  @HttpCode(200)
  @ApiKeyAuth('uploads:write')
  @UseInterceptors(UploadFilesInterceptor)
  @ApiOperation({
    operationId: 'uploadFiles',
    summary: 'Upload reference images (free)',
    description:
      `PNG, JPEG, WebP or GIF, decided by the file's bytes; at most ${UPLOAD_LIMITS.maxBytes} bytes each, ` +
      `${UPLOAD_LIMITS.maxFiles} files per request, ${UPLOAD_LIMITS.maxPixels} pixels and ${UPLOAD_LIMITS.maxDimension} ` +
      'pixels per side. A refusal stores nothing and answers invalid_request with details { file, reason } where reason ' +
      'is no_files, too_many_files, too_large, unsupported_type or too_many_pixels.',
  })
  @ApiConsumes('multipart/form-data')
  @ApiBody({
    schema: {
      type: 'object',
      required: [UPLOAD_FIELD],
      properties: {
        [UPLOAD_FIELD]: {
          type: 'array',
          items: { type: 'string', format: 'binary' },
          minItems: 1,
          maxItems: UPLOAD_LIMITS.maxFiles,
          description: 'Repeat the field once per file',
        },
      },
    },
  })
  @ApiOkResponse({ type: UploadResponseDto })
  async upload(
    @CurrentKey() auth: AuthenticatedKey,
    @UploadedFiles() files: Express.Multer.File[] | undefined,
  ): Promise<UploadResponseDto> {
    const stored = await this.uploads.store(
      auth.account.id,
      (files ?? []).map((f) => ({ name: f.originalname, path: f.path, bytes: f.size })),
    );
    return UploadResponseDto.from(stored);
  }
}

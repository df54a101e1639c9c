import { ApiProperty } from '@nestjs/swagger';
import { UploadEntity } from '@app/database';

export class UploadedFileDto {
  @ApiProperty({
    description: 'Public URL; pass it in refImages. Needs no authentication.',
    example: 'http://localhost:8080/files/uploads/3f2a…/cat.png',
  })
  url: string;

  @ApiProperty({ description: 'Original file name as sent by the client', example: 'cat.png' })
  name: string;
}

export class UploadResponseDto {
  @ApiProperty({ type: [UploadedFileDto], description: 'One entry per uploaded file, in request order' })
  files: UploadedFileDto[];

  static from(uploads: UploadEntity[]): UploadResponseDto {
    return { files: uploads.map((u) => ({ url: u.url, name: u.name })) };
  }
}

import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { UploadEntity } from '@app/database';

@Injectable()
export class UploadsService {
  constructor(@InjectRepository(UploadEntity) private readonly uploads: Repository<UploadEntity>) {}

  /** The caller's own uploads among `urls`, keyed by URL; foreign or unknown URLs are absent. */
  async findOwnedByUrls(accountId: string, urls: string[]): Promise<Map<string, UploadEntity>> {
    if (urls.length === 0) return new Map();
    const rows = await this.uploads.find({ where: { accountId, url: In([...new Set(urls)]) } });
    return new Map(rows.map((u) => [u.url, u]));
  }
}

import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { AccountEntity } from './account.entity';

@Entity({ name: 'uploads' })
@Index('uploads_account_url_idx', ['accountId', 'url'])
@Index('uploads_created_at_idx', ['createdAt'])
export class UploadEntity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  /** Object key in storage; holds 128 random bits so the public URL is unguessable. */
  @Column({ name: 'storage_key', type: 'text' })
  storageKey: string;

  @Column({ type: 'text' })
  url: string;

  @Column({ type: 'text' })
  name: string;

  @Column({ name: 'content_type', type: 'text' })
  contentType: string;

  @Column({ type: 'integer' })
  bytes: number;

  @Column({ type: 'integer' })
  width: number;

  @Column({ type: 'integer' })
  height: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}

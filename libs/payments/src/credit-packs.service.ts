import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { CreditPackEntity, isUuid } from '@app/database';
import { notFound } from '@app/errors';

export interface CreditPackInput {
  name?: string;
  credits: number;
  priceCents: number;
  currency: string;
  active?: boolean;
}

export type CreditPackPatch = Partial<CreditPackInput>;

/** The name Checkout shows when the operator gave none: "1,000 credits". */
export function defaultPackName(credits: number): string {
  return `${credits.toLocaleString('en-US')} credits`;
}

/** The credit packs operators define and account holders buy; the only writer of credit_packs. */
@Injectable()
export class CreditPacksService {
  constructor(@InjectRepository(CreditPackEntity) private readonly packs: Repository<CreditPackEntity>) {}

  async create(input: CreditPackInput): Promise<CreditPackEntity> {
    return this.packs.save(
      this.packs.create({
        name: input.name ?? defaultPackName(input.credits),
        credits: input.credits,
        priceCents: input.priceCents,
        currency: input.currency.toLowerCase(),
        active: input.active ?? true,
      }),
    );
  }

  /** Every pack, archived ones included (the operator's view), cheapest first. */
  async list(): Promise<CreditPackEntity[]> {
    return this.packs.find({ order: { priceCents: 'ASC', createdAt: 'ASC' } });
  }

  /** The packs on sale, cheapest first. */
  async listActive(): Promise<CreditPackEntity[]> {
    return this.packs.find({ where: { active: true }, order: { priceCents: 'ASC', createdAt: 'ASC' } });
  }

  /** A pack's new price or credits apply to purchases started after the change; paid ones keep theirs. */
  async update(id: string, patch: CreditPackPatch): Promise<CreditPackEntity> {
    const pack = await this.find(id);
    if (patch.name !== undefined) pack.name = patch.name;
    if (patch.credits !== undefined) pack.credits = patch.credits;
    if (patch.priceCents !== undefined) pack.priceCents = patch.priceCents;
    if (patch.currency !== undefined) pack.currency = patch.currency.toLowerCase();
    if (patch.active !== undefined) pack.active = patch.active;
    return this.packs.save(pack);
  }

  /** Takes a pack off sale (idempotent). Never deleted: purchases point at the pack they bought. */
  async archive(id: string): Promise<CreditPackEntity> {
    return this.update(id, { active: false });
  }

  /** A pack on sale, or not_found (unknown, archived, or not an id). */
  async requireActive(id: string): Promise<CreditPackEntity> {
    const pack = await this.find(id);
    if (!pack.active) throw notFound('Credit pack');
    return pack;
  }

  private async find(id: string): Promise<CreditPackEntity> {
    const pack = isUuid(id) ? await this.packs.findOneBy({ id }) : null;
    if (!pack) throw notFound('Credit pack');
    return pack;
  }
}

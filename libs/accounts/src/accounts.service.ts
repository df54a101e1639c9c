import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { AccountEntity, AccountStatus, Cursor, encodeCursor, isUuid, pgError, PlanEntity, PlanKey } from '@app/database';
import { BillingService } from '@app/billing';
import { ErrorCode, KilnError } from '@app/errors';
import { hashPassword } from './password';
import { countActiveBatches } from './plan-limits';

export interface AccountView {
  account: AccountEntity;
  plan: PlanEntity;
  activeBatches: number;
  activeEconomyBatches: number;
}

@Injectable()
export class AccountsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(AccountEntity) private readonly accounts: Repository<AccountEntity>,
    @InjectRepository(PlanEntity) private readonly plans: Repository<PlanEntity>,
    private readonly billing: BillingService,
  ) {}

  async create(input: {
    email: string;
    password?: string;
    plan: PlanKey;
    credits?: number;
    creditsReason?: string;
  }): Promise<AccountEntity> {
    await this.requirePlan(input.plan);
    const email = input.email.trim();
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    // The account and its first credits (SIGNUP_CREDITS) commit together: a crash between
    // the two cannot leave an account without the grant it was promised.
    let id: string;
    try {
      id = await this.db.transaction(async (m) => {
        const accounts = m.getRepository(AccountEntity);
        const account = await accounts.save(accounts.create({ email, passwordHash, planKey: input.plan, status: 'active' }));
        if (input.credits && input.credits > 0) {
          await this.billing.adjustIn(m, account.id, input.credits, 'grant', input.creditsReason ?? 'Initial credits');
        }
        return account.id;
      });
    } catch (err) {
      if (pgError(err).code === '23505') {
        throw new KilnError(ErrorCode.EmailTaken, 'An account with this email already exists', { field: 'email' });
      }
      throw err;
    }
    return this.get(id);
  }

  async get(id: string): Promise<AccountEntity> {
    const account = isUuid(id) ? await this.accounts.findOne({ where: { id } }) : null;
    if (!account) throw new KilnError(ErrorCode.NotFound, 'Account not found');
    return account;
  }

  async findByEmail(email: string): Promise<AccountEntity | null> {
    return this.accounts.createQueryBuilder('a').where('lower(a.email) = lower(:email)', { email: email.trim() }).getOne();
  }

  /** Account, plan and the number of unfinished batches of each tier (what counts against the plan's two caps). */
  async view(id: string): Promise<AccountView> {
    const account = await this.get(id);
    const plan = await this.requirePlan(account.planKey);
    const [activeBatches, activeEconomyBatches] = await Promise.all([
      countActiveBatches(this.db, id, 'standard'),
      countActiveBatches(this.db, id, 'economy'),
    ]);
    return { account, plan, activeBatches, activeEconomyBatches };
  }

  async update(id: string, patch: { plan?: PlanKey; status?: AccountStatus }): Promise<AccountEntity> {
    const account = await this.get(id);
    if (patch.plan !== undefined) {
      await this.requirePlan(patch.plan);
      account.planKey = patch.plan;
    }
    if (patch.status !== undefined) account.status = patch.status;
    await this.accounts.update({ id }, { planKey: account.planKey, status: account.status });
    return this.get(id);
  }

  /** A new password (the operator's `kiln-admin password`), e.g. for an account made without one. */
  async setPassword(id: string, password: string): Promise<void> {
    await this.get(id);
    await this.accounts.update({ id }, { passwordHash: await hashPassword(password) });
  }

  /** The holder's `credits.low` line (null: no alert); the next charge that crosses it fires. */
  async setLowCreditsThreshold(id: string, threshold: number | null): Promise<AccountEntity> {
    await this.get(id);
    await this.accounts.update({ id }, { lowCreditsThreshold: threshold });
    return this.get(id);
  }

  async list(limit: number, after: Cursor | null): Promise<{ accounts: AccountEntity[]; nextCursor: string | null }> {
    const qb = this.accounts.createQueryBuilder('a').orderBy('a.created_at', 'DESC').addOrderBy('a.id', 'DESC');
    if (after) {
      qb.where('(a.created_at, a.id) < (:at, :id)', { at: after.createdAt, id: after.id });
    }
    const rows = await qb.limit(limit + 1).getMany();
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      accounts: page,
      nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
    };
  }

  async listPlans(): Promise<PlanEntity[]> {
    return this.plans.find({ order: { maxImagesPerBatch: 'ASC' } });
  }

  async requirePlan(key: string): Promise<PlanEntity> {
    const plan = await this.plans.findOne({ where: { key: key as PlanKey } });
    if (!plan) {
      throw new KilnError(ErrorCode.InvalidRequest, `Unknown plan ${key}`, { field: 'plan', reason: 'unknown_plan' });
    }
    return plan;
  }

  async updatePlan(
    key: string,
    patch: Partial<
      Pick<
        PlanEntity,
        'maxKeys' | 'maxImagesPerBatch' | 'maxConcurrentBatches' | 'maxConcurrentEconomyBatches' | 'requestsPerMinute' | 'apiAccess'
      >
    >,
  ): Promise<PlanEntity> {
    await this.requirePlan(key);
    await this.plans.update({ key: key as PlanKey }, patch);
    return this.requirePlan(key);
  }
}

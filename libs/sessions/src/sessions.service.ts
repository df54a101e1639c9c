import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, IsNull, Repository } from 'typeorm';
import { AccountsService, hashPassword, verifyPassword } from '@app/accounts';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { AccountEntity, PLAN_KEYS, PlanEntity, PlanKey, SessionEntity } from '@app/database';
import { ErrorCode, KilnError } from '@app/errors';
import { generateSessionToken, SESSION_PATTERN, SESSION_TTL_MS, sessionTokenHash } from './session-token';

/** What signup and login hand back: the token exists nowhere else after this. */
export interface IssuedSession {
  token: string;
  expiresAt: Date;
}

export interface AuthenticatedSession {
  session: SessionEntity;
  account: AccountEntity;
  plan: PlanEntity;
}

const invalidSession = (reason: 'unknown' | 'expired' | 'signed_out') =>
  new KilnError(ErrorCode.InvalidCredentials, 'Session not valid; sign in again', { reason });

/**
 * Dashboard sign-in for account holders. Sessions are checked against the database on every
 * request (no cache), so logout and account disabling apply at once on every api replica.
 */
@Injectable()
export class SessionsService implements OnModuleInit {
  /** Verified against for unknown emails so that both refusals cost one scrypt. */
  private dummyHash: Promise<string> | null = null;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(SessionEntity) private readonly sessions: Repository<SessionEntity>,
    private readonly accounts: AccountsService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /** A SIGNUP_PLAN that names no plan stops the api at boot, not every sign-up later. */
  onModuleInit(): void {
    if (!(PLAN_KEYS as readonly string[]).includes(this.config.signup.plan)) {
      throw new Error(`SIGNUP_PLAN must be one of ${PLAN_KEYS.join(', ')} (got ${this.config.signup.plan})`);
    }
  }

  /** A new account on SIGNUP_PLAN (free) with SIGNUP_CREDITS (none), signed in. */
  async signup(email: string, password: string): Promise<IssuedSession> {
    const { plan, credits } = this.config.signup;
    const account = await this.accounts.create({ email, password, plan: plan as PlanKey, credits, creditsReason: 'Sign-up credits' });
    return this.issue(account.id);
  }

  /**
   * Unknown email and wrong password get the same answer after the same work. A disabled
   * account is only revealed to someone who knows its password.
   */
  async login(email: string, password: string): Promise<IssuedSession> {
    const account = await this.accounts.findByEmail(email);
    const ok = await verifyPassword(password, account?.passwordHash ?? (await this.dummy()));
    if (!account || !account.passwordHash || !ok) {
      throw new KilnError(ErrorCode.InvalidCredentials, 'Email or password not recognised');
    }
    if (account.status !== 'active') throw new KilnError(ErrorCode.AccountDisabled, 'This account is disabled');
    // Housekeeping: this account's expired sessions are of no use to anyone.
    await this.db.query(`DELETE FROM sessions WHERE account_id = $1 AND expires_at < now()`, [account.id]);
    return this.issue(account.id);
  }

  async authenticate(token: string): Promise<AuthenticatedSession> {
    if (!SESSION_PATTERN.test(token)) throw invalidSession('unknown');
    const session = await this.sessions
      .createQueryBuilder('s')
      .innerJoinAndMapOne('s.account', AccountEntity, 'a', 'a.id = s.account_id')
      .innerJoinAndMapOne('a.plan', PlanEntity, 'p', 'p.key = a.plan_key')
      .where('s.token_hash = :hash', { hash: sessionTokenHash(token) })
      .getOne();
    if (!session) throw invalidSession('unknown');
    if (session.revokedAt) throw invalidSession('signed_out');
    if (session.expiresAt.getTime() <= Date.now()) throw invalidSession('expired');
    const account = session.account!;
    if (account.status !== 'active') throw new KilnError(ErrorCode.AccountDisabled, 'This account is disabled');
    return { session, account, plan: account.plan! };
  }

  async logout(sessionId: string): Promise<void> {
    await this.sessions.update({ id: sessionId, revokedAt: IsNull() }, { revokedAt: () => 'now()' });
  }

  private async issue(accountId: string): Promise<IssuedSession> {
    const token = generateSessionToken();
    const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
    await this.sessions.insert({ accountId, tokenHash: sessionTokenHash(token), expiresAt, revokedAt: null });
    return { token, expiresAt };
  }

  private dummy(): Promise<string> {
    this.dummyHash ??= hashPassword('kiln-dummy-password-for-timing');
    return this.dummyHash;
  }
}

import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { invalidRequest } from '@app/errors';

/** Edits reach every api replica within this long. */
export const CONTENT_POLICY_CACHE_MS = 5000;
export const MAX_BLOCKED_TERMS = 10_000;
export const MAX_BLOCKED_TERM_LENGTH = 200;

/**
 * The matcher over a list of blocked terms. Whole-word, case-insensitive matching after
 * Unicode NFKC folding, so full-width letters or odd spacing do not slip past it while
 * "scampi" never matches "csam". Multi-word terms match across any run of whitespace or
 * punctuation between the words. A keyword screen, not a classifier: it cannot judge context,
 * and upstream models apply their own policies on top.
 */
export class ContentPolicy {
  private readonly pattern: RegExp | null;

  constructor(terms: readonly string[]) {
    const alternatives = terms
      .map((t) => t.normalize('NFKC').toLowerCase().trim().split(/\s+/).filter(Boolean))
      .filter((words) => words.length > 0)
      .map((words) => words.map(escapeRegExp).join('[\\s\\p{P}_]+'));
    this.pattern = alternatives.length > 0 ? new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives.join('|')})(?![\\p{L}\\p{N}])`, 'u') : null;
  }

  isBlocked(prompt: string): boolean {
    return this.pattern !== null && this.pattern.test(prompt.normalize('NFKC').toLowerCase());
  }

  /** Index of the first blocked prompt, or -1. */
  firstBlocked(prompts: readonly string[]): number {
    return prompts.findIndex((p) => this.isBlocked(p));
  }
}

/**
 * The content policy as catalog data: the terms live in content_policy_terms (seeded by a
 * migration, edited with GET/PUT /v1/admin/content-policy), read through a cache of a few
 * seconds so batch creation does not query them each time.
 */
@Injectable()
export class ContentPolicyService {
  private cached: { policy: ContentPolicy; until: number } | null = null;

  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async terms(): Promise<string[]> {
    const rows: { term: string }[] = await this.db.query(`SELECT term FROM content_policy_terms ORDER BY term`);
    return rows.map((r) => r.term);
  }

  /** Index of the first blocked prompt, or -1. */
  async firstBlocked(prompts: readonly string[]): Promise<number> {
    return (await this.policy()).firstBlocked(prompts);
  }

  /** Replaces the whole list (normalised, deduplicated); refuses empty or oversized terms. */
  async replace(terms: unknown[]): Promise<string[]> {
    const clean = new Set<string>();
    terms.forEach((t, i) => {
      if (typeof t !== 'string') throw invalidRequest(`terms[${i}]`, 'not_a_string');
      const term = t.normalize('NFKC').toLowerCase().trim().replace(/\s+/g, ' ');
      if (!term) throw invalidRequest(`terms[${i}]`, 'empty');
      if (term.length > MAX_BLOCKED_TERM_LENGTH)
        throw invalidRequest(`terms[${i}]`, 'too_long', `terms[${i}] is longer than ${MAX_BLOCKED_TERM_LENGTH} characters`);
      clean.add(term);
    });
    if (clean.size > MAX_BLOCKED_TERMS) throw invalidRequest('terms', 'too_many', `At most ${MAX_BLOCKED_TERMS} terms`);
    await this.db.transaction(async (m) => {
      await m.query(`DELETE FROM content_policy_terms`);
      if (clean.size > 0) await m.query(`INSERT INTO content_policy_terms (term) SELECT unnest($1::text[])`, [[...clean]]);
    });
    this.cached = null;
    return this.terms();
  }

  private async policy(): Promise<ContentPolicy> {
    if (this.cached && this.cached.until > Date.now()) return this.cached.policy;
    const policy = new ContentPolicy(await this.terms());
    this.cached = { policy, until: Date.now() + CONTENT_POLICY_CACHE_MS };
    return policy;
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

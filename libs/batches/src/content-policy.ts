import { Inject, Injectable, Optional } from '@nestjs/common';

/** Injection token: replace the blocked-term list (e.g. `{ provide: BLOCKED_TERMS, useValue: [...] }`). */
export const BLOCKED_TERMS = Symbol('BLOCKED_TERMS');

/**
 * Kiln's default list. It is a keyword screen for requests that are unambiguous about
 * wanting sexual content involving minors, not a classifier: it cannot judge context, and
 * upstream models apply their own policies on top. Operators extend it for their needs.
 */
export const DEFAULT_BLOCKED_TERMS: readonly string[] = [
  'csam',
  'child porn',
  'child pornography',
  'child sexual abuse material',
  'underage porn',
  'underage nude',
  'underage nudes',
  'nude child',
  'nude children',
  'naked child',
  'naked children',
  'loli porn',
  'lolicon',
  'pedophile porn',
];

/**
 * Whole-word, case-insensitive matching after Unicode NFKC folding, so full-width letters
 * or odd spacing do not slip past it while "scampi" never matches "csam". Multi-word terms
 * match across any run of whitespace or punctuation between the words.
 */
@Injectable()
export class ContentPolicy {
  private readonly pattern: RegExp | null;

  constructor(@Optional() @Inject(BLOCKED_TERMS) terms: readonly string[] = DEFAULT_BLOCKED_TERMS) {
    const alternatives = (terms ?? DEFAULT_BLOCKED_TERMS)
      .map((t) => t.normalize('NFKC').toLowerCase().trim().split(/\s+/).filter(Boolean))
      .filter((words) => words.length > 0)
      .map((words) => words.map(escapeRegExp).join('[\\s\\p{P}_]+'));
    this.pattern =
      alternatives.length > 0 ? new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives.join('|')})(?![\\p{L}\\p{N}])`, 'u') : null;
  }

  isBlocked(prompt: string): boolean {
    return this.pattern !== null && this.pattern.test(prompt.normalize('NFKC').toLowerCase());
  }

  /** Index of the first blocked prompt, or -1. */
  firstBlocked(prompts: readonly string[]): number {
    return prompts.findIndex((p) => this.isBlocked(p));
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

import { RESOLUTIONS, Resolution } from '@app/geometry';

/**
 * How an upstream bills one image, in its own units (docs/providers.md "Upstream cost"). A
 * preset carries its vendor's rule with the day it was read and where; a route takes it as
 * its `price` setting, and each type's price function (`<type>/<type>.price.ts`) applies it
 * to what the upstream really made. The operator's own `cost` table (cost.ts) wins over it.
 */
export type PriceRule = PriceRuleCommon &
  (
    | { per: 'image'; usd: number }
    /** By the output resolution the upstream made (its own 1K / 2K / 4K). */
    | { per: 'resolution'; usd: Partial<Record<Resolution, number>> }
    /**
     * By output megapixels; `rounding: "up"` bills every started megapixel as a whole one.
     * `megapixel`: the pixels the vendor counts as one (default 1024 x 1024, so a 1024x1024
     * image is one megapixel, as the vendors that bill this way price it).
     */
    | { per: 'megapixel'; usd: number; rounding: 'up' | 'exact'; megapixel?: number }
    /** By the upstream's own size ("1536x1024"), flat or by quality. */
    | { per: 'size'; usd: Record<string, number | Partial<Record<PriceQuality, number>>> }
    /** By the run time the upstream reports; `typicalSeconds` prices a pair before any run (route warnings). */
    | { per: 'second'; usd: number; typicalSeconds?: number }
  );

export type PriceKind = PriceRule['per'];
export const PRICE_KINDS: readonly PriceKind[] = ['image', 'resolution', 'megapixel', 'size', 'second'];

interface PriceRuleCommon {
  /** USD per million tokens, used instead of the rule when the upstream's answer reports its usage. */
  tokens?: TokenPrices;
  /** The upstream's batch API price as a share of this one (economy tier), e.g. 0.5. */
  economyFactor?: number;
}

export interface TokenPrices {
  /** Input tokens (text; images too unless `inputImage` is listed). */
  input: number;
  inputImage?: number;
  /** Output image tokens. */
  output: number;
  /** Output text (and thinking) tokens, when priced apart from image tokens; else at `output`. */
  outputText?: number;
}

/** What an upstream's answer said it used, in tokens (OpenAI's `usage`, Gemini's `usageMetadata`). */
export interface TokenUsage {
  inputTextTokens: number;
  inputImageTokens: number;
  outputImageTokens: number;
  outputTextTokens: number;
}

export type PriceQuality = 'low' | 'medium' | 'high' | 'auto';
const QUALITIES: readonly string[] = ['low', 'medium', 'high', 'auto'];

/** What a preset says about its upstream's price: the rule, when and where it was read, and what could not be confirmed. */
export interface PresetPrice {
  rule: PriceRule;
  /** The day (YYYY-MM-DD) the price was read from the vendor's page: prices move. */
  readOn: string;
  /** The vendor's page the figures come from. */
  source: string;
  /** Figures of the rule that the vendor's own page did not show when read (taken from elsewhere, or inferred). */
  unconfirmed?: string[];
  note?: string;
}

/** What one finished upstream call made, as its price depends on it. */
export interface MadeImage {
  resolution: string;
  /** The upstream's image size (the task's result size). */
  width: number;
  height: number;
  /** The batch's quality (null or absent when the model takes none). */
  quality: string | null;
  /** Tokens the upstream's answer reported, when it reported them. */
  usage?: TokenUsage;
  /** Seconds of run time the upstream reported, when it did. */
  runSeconds?: number;
}

/** A type's price function: the rule kinds its upstream bills by and what one made image costs (USD; null: the rule cannot say). */
export interface TypePricing {
  readonly kinds: readonly PriceKind[];
  /** Whether the upstream's answers report token usage (the rule's `tokens` then apply). */
  readonly reportsTokens: boolean;
  price(rule: PriceRule, made: MadeImage): number | null;
}

/** Where a price may not go: above this an operator surely typed cents or micro-dollars. */
export const MAX_USD_PER_IMAGE = 100;
const MAX_USD_PER_MILLION_TOKENS = 10_000;

const DEFAULT_MEGAPIXEL = 1024 * 1024;

const isUsd = (v: unknown, max = MAX_USD_PER_IMAGE): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= max;
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const SIZE_KEY = /^[1-9]\d{1,4}x[1-9]\d{1,4}$/;

// ---- the kinds, each as the vendors bill it ----

/** Megapixels as the vendor counts them: rounded up to whole ones when it bills so. */
export function billedMegapixels(rule: Extract<PriceRule, { per: 'megapixel' }>, width: number, height: number): number {
  const mp = (width * height) / (rule.megapixel ?? DEFAULT_MEGAPIXEL);
  // A hair over a whole megapixel from float division is not a started one.
  return rule.rounding === 'up' ? Math.ceil(mp - 1e-9) : mp;
}

/**
 * A size table's price: quality `auto`, or none, at the `auto` entry if listed, else the
 * dearest listed quality (the upstream chose, and the report should not flatter the margin).
 */
export function sizeTablePrice(entry: number | Partial<Record<PriceQuality, number>> | undefined, quality: string | null): number | null {
  if (entry === undefined) return null;
  if (typeof entry === 'number') return entry;
  const asked = quality && quality !== 'auto' ? entry[quality as PriceQuality] : entry.auto;
  if (asked !== undefined) return asked;
  const listed = Object.values(entry).filter((p): p is number => typeof p === 'number');
  return listed.length ? Math.max(...listed) : null;
}

/** USD for the tokens an answer reported. */
export function tokensUsd(prices: TokenPrices, usage: TokenUsage): number {
  return (
    (usage.inputTextTokens * prices.input +
      usage.inputImageTokens * (prices.inputImage ?? prices.input) +
      usage.outputImageTokens * prices.output +
      usage.outputTextTokens * (prices.outputText ?? prices.output)) /
    1_000_000
  );
}

/**
 * The rule applied to what was made, for the kinds every type reads alike (a type's own
 * function handles its vendor's particulars first). null: the rule has no figure for it.
 */
export function applyPriceRule(rule: PriceRule, made: MadeImage): number | null {
  switch (rule.per) {
    case 'image':
      return rule.usd;
    case 'resolution':
      return rule.usd[made.resolution as Resolution] ?? null;
    case 'megapixel':
      return rule.usd * billedMegapixels(rule, made.width, made.height);
    case 'size':
      return sizeTablePrice(rule.usd[`${made.width}x${made.height}`], made.quality);
    case 'second':
      return made.runSeconds !== undefined && made.runSeconds >= 0 ? rule.usd * made.runSeconds : null;
  }
}

/** The usage-token price when the rule has one and the answer reported usage; else the rule. */
export function priceByTokensOr(rule: PriceRule, made: MadeImage, byRule: () => number | null): number | null {
  if (rule.tokens && made.usage) return tokensUsd(rule.tokens, made.usage);
  return byRule();
}

// ---- the route setting ----

function checkTokens(v: unknown): string | null {
  if (!isObject(v)) return 'invalid_tokens';
  for (const [key, price] of Object.entries(v)) {
    if (!['input', 'inputImage', 'output', 'outputText'].includes(key)) return 'unknown_key';
    if (!isUsd(price, MAX_USD_PER_MILLION_TOKENS)) return 'invalid_price';
  }
  return isUsd(v.input, MAX_USD_PER_MILLION_TOKENS) && isUsd(v.output, MAX_USD_PER_MILLION_TOKENS) ? null : 'invalid_tokens';
}

/** null when `v` is a price rule of one of `kinds`, else the reason. */
export function checkPriceRule(kinds: readonly PriceKind[]): (v: unknown) => string | null {
  return (v) => {
    if (!isObject(v)) return 'invalid';
    if (!(kinds as readonly unknown[]).includes(v.per)) return 'unknown_per';
    const allowed = [
      'per',
      'usd',
      'tokens',
      'economyFactor',
      ...({ megapixel: ['rounding', 'megapixel'], second: ['typicalSeconds'] }[v.per as string] ?? []),
    ];
    if (Object.keys(v).some((k) => !allowed.includes(k))) return 'unknown_key';
    if (v.tokens !== undefined) {
      const reason = checkTokens(v.tokens);
      if (reason) return reason;
    }
    if (v.economyFactor !== undefined && !(typeof v.economyFactor === 'number' && v.economyFactor > 0 && v.economyFactor <= 1))
      return 'invalid_economy_factor';
    switch (v.per as PriceKind) {
      case 'image':
      case 'second':
        if (v.typicalSeconds !== undefined && !(typeof v.typicalSeconds === 'number' && v.typicalSeconds > 0)) return 'invalid';
        return isUsd(v.usd) ? null : 'invalid_price';
      case 'megapixel':
        if (v.rounding !== 'up' && v.rounding !== 'exact') return 'invalid_rounding';
        if (v.megapixel !== undefined && !(Number.isInteger(v.megapixel) && (v.megapixel as number) > 0)) return 'invalid';
        return isUsd(v.usd) ? null : 'invalid_price';
      case 'resolution':
        if (!isObject(v.usd) || Object.keys(v.usd).length === 0) return 'invalid_price';
        for (const [res, price] of Object.entries(v.usd)) {
          if (!(RESOLUTIONS as readonly string[]).includes(res)) return 'unknown_key';
          if (!isUsd(price)) return 'invalid_price';
        }
        return null;
      case 'size':
        if (!isObject(v.usd) || Object.keys(v.usd).length === 0) return 'invalid_price';
        for (const [size, price] of Object.entries(v.usd)) {
          if (!SIZE_KEY.test(size)) return 'unknown_key';
          if (isUsd(price)) continue;
          if (!isObject(price) || Object.keys(price).length === 0) return 'invalid_price';
          if (Object.entries(price).some(([q, p]) => !QUALITIES.includes(q) || !isUsd(p))) return 'invalid_price';
        }
        return null;
    }
  };
}

// ---- one line for people ----

const usd = (n: number) => `${Number(n.toPrecision(6))}`;

function describeKind(rule: PriceRule): string {
  switch (rule.per) {
    case 'image':
      return `USD ${usd(rule.usd)} per image`;
    case 'resolution':
      return `USD per image by output resolution: ${Object.entries(rule.usd)
        .map(([r, p]) => `${r} ${usd(p)}`)
        .join(', ')}`;
    case 'megapixel': {
      const unit = (rule.megapixel ?? DEFAULT_MEGAPIXEL) === DEFAULT_MEGAPIXEL ? '' : ` of ${rule.megapixel} pixels`;
      return `USD ${usd(rule.usd)} per megapixel${unit}${rule.rounding === 'up' ? ', rounded up' : ''}`;
    }
    case 'size':
      return `USD per image by size x quality: ${Object.entries(rule.usd)
        .map(([size, p]) =>
          typeof p === 'number'
            ? `${size} ${usd(p)}`
            : `${size} ${Object.entries(p)
                .map(([q, v]) => `${q} ${usd(v)}`)
                .join(' / ')}`,
        )
        .join('; ')}`;
    case 'second':
      return `USD ${usd(rule.usd)} per second of run time`;
  }
}

/**
 * A price rule (or a preset's price, with its date and source) in one line, e.g.
 * "USD 0.025 per megapixel, rounded up (fal, read 2026-11-28, https://fal.ai/...)"; the docs'
 * preset tables and GET /v1/admin/providers show it.
 */
export function describePriceRule(price: PriceRule | PresetPrice, vendor?: string): string {
  const rule = 'rule' in price ? price.rule : price;
  const parts = [describeKind(rule)];
  if (rule.tokens) {
    const t = rule.tokens;
    const inImage = t.inputImage !== undefined ? `, image input ${usd(t.inputImage)}` : '';
    const outText = t.outputText !== undefined ? `, text output ${usd(t.outputText)}` : '';
    parts.push(`by usage tokens when reported: USD per million input ${usd(t.input)}${inImage}, image output ${usd(t.output)}${outText}`);
  }
  if (rule.economyFactor !== undefined) parts.push(`batch API x ${usd(rule.economyFactor)}`);
  let line = parts.join('; ');
  if ('rule' in price) {
    const said = [vendor, `read ${price.readOn}`, price.source].filter(Boolean).join(', ');
    line += ` (${said})`;
    if (price.unconfirmed?.length) line += `; unconfirmed: ${price.unconfirmed.join(', ')}`;
  }
  return line;
}

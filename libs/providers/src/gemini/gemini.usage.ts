import type { TokenUsage } from '../price-rule';

type ModalityCount = { modality?: unknown; tokenCount?: unknown };

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);
const ofModality = (details: unknown, modality: string): number | undefined =>
  Array.isArray(details)
    ? (details as ModalityCount[])
        .filter((d) => d?.modality === modality)
        .reduce<number | undefined>((n, d) => (n ?? 0) + (count(d.tokenCount) ?? 0), undefined)
    : undefined;

/**
 * The tokens a generateContent answer reports (`usageMetadata`): prompt tokens split by
 * modality, candidate tokens (image ones by `candidatesTokensDetails`; without the split all
 * are priced as image tokens, the dearer) and thinking tokens as text output. undefined when
 * the answer carries none.
 */
export function geminiUsageOf(answer: unknown): TokenUsage | undefined {
  const meta = (answer as { usageMetadata?: Record<string, unknown> } | null)?.usageMetadata;
  if (!meta || typeof meta !== 'object') return undefined;
  const prompt = count(meta.promptTokenCount);
  const candidates = count(meta.candidatesTokenCount);
  if (prompt === undefined || candidates === undefined) return undefined;
  const inputImage = ofModality(meta.promptTokensDetails, 'IMAGE') ?? 0;
  const outputImage = ofModality(meta.candidatesTokensDetails, 'IMAGE') ?? candidates;
  return {
    inputTextTokens: Math.max(0, prompt - inputImage),
    inputImageTokens: inputImage,
    outputImageTokens: outputImage,
    outputTextTokens: Math.max(0, candidates - outputImage) + (count(meta.thoughtsTokenCount) ?? 0),
  };
}

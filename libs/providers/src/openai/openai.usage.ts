import type { TokenUsage } from '../price-rule';

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/**
 * The tokens an images answer reports (`usage`: input_tokens with their text / image split,
 * output_tokens, all image tokens unless output_tokens_details says otherwise); undefined when
 * the answer carries none (DALL-E-style and many compatible servers).
 */
export function openAiUsageOf(answer: unknown): TokenUsage | undefined {
  const usage = (answer as { usage?: Record<string, unknown> } | null)?.usage;
  if (!usage || typeof usage !== 'object') return undefined;
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  if (input === undefined || output === undefined) return undefined;
  const inDetails = (usage.input_tokens_details ?? {}) as Record<string, unknown>;
  const outDetails = (usage.output_tokens_details ?? {}) as Record<string, unknown>;
  const inputImage = count(inDetails.image_tokens) ?? 0;
  const outputText = count(outDetails.text_tokens) ?? 0;
  return {
    inputTextTokens: count(inDetails.text_tokens) ?? Math.max(0, input - inputImage),
    inputImageTokens: inputImage,
    outputImageTokens: count(outDetails.image_tokens) ?? Math.max(0, output - outputText),
    outputTextTokens: outputText,
  };
}

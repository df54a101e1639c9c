import { applyPriceRule, priceByTokensOr, TypePricing } from '../price-rule';

/**
 * How OpenAI bills a GPT image: by the tokens its answer reports (`usage`: input text and
 * image tokens, output image tokens) when it reports them, else by its published table of
 * size x quality; a route's flat per-image price stays possible for compatible servers.
 */
export const openAiPricing: TypePricing = {
  kinds: ['size', 'image'],
  reportsTokens: true,
  price: (rule, made) => priceByTokensOr(rule, made, () => applyPriceRule(rule, made)),
};

import { MAX_OPENAI_ALIASES, OPENAI_MODEL_NAME, validateOpenAiAliases } from './openai-aliases';

describe('OpenAI aliases of a model', () => {
  it("takes OpenAI's model names and nothing that is not one", () => {
    for (const name of ['gpt-image-1', 'gpt-image-1.5', 'gpt-image-1-mini', 'dall-e-3', 'chatgpt-image-latest'])
      expect(OPENAI_MODEL_NAME.test(name)).toBe(true);
    for (const name of ['', 'GPT-Image-1', 'gpt image 1', '-gpt', 'gpt-', 'gpt--image', 'gpt.', 'ft:gpt', 'a'.repeat(65)])
      expect(OPENAI_MODEL_NAME.test(name)).toBe(false);
  });

  it('refuses a list that is not a few distinct names, naming the reason', () => {
    const reasonOf = (input: unknown) => {
      try {
        validateOpenAiAliases(input);
        return null;
      } catch (err) {
        return (err as { details: { field: string; reason: string } }).details;
      }
    };
    expect(validateOpenAiAliases(['gpt-image-1'])).toEqual(['gpt-image-1']);
    expect(validateOpenAiAliases([])).toEqual([]);
    expect(reasonOf('gpt-image-1')).toEqual({ field: 'openaiAliases', reason: 'not_an_array' });
    expect(reasonOf([1])).toEqual({ field: 'openaiAliases', reason: 'bad_name' });
    expect(reasonOf(['dall-e-3', 'dall-e-3'])).toEqual({ field: 'openaiAliases', reason: 'duplicate' });
    expect(reasonOf(Array.from({ length: MAX_OPENAI_ALIASES + 1 }, (_, i) => `m${i}`))).toEqual({
      field: 'openaiAliases',
      reason: 'too_many',
    });
  });
});

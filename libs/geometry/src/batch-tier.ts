/**
 * A batch's tier (not to be confused with a resolution tier): standard runs as soon as a
 * generator has room; economy goes through an upstream batch API, at the economy price, by
 * its window. Its one home, on the floor below every lib that speaks it: providers price by
 * it, the database stores it on batches and tasks, the generator records at it.
 */
export const BATCH_TIERS = ['standard', 'economy'] as const;
export type BatchTier = (typeof BATCH_TIERS)[number];

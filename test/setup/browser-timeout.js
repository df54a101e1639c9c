// The browser project drives Chromium against a live Kiln: one step may wait for a batch to finish.
jest.setTimeout(180_000);

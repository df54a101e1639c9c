// The browser project drives Chromium against a live Kiln: one step may wait for a batch to finish.
// No jest.retryTimes: each wait is on the condition it needs (never a sleep), so a failure is a
// defect or a wait to fix, not a flake to run again.
jest.setTimeout(180_000);

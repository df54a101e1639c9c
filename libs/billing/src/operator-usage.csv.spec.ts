import { OperatorUsageRow, parseUsageWindow, usageReportCsv } from './operator-usage.service';

const row = (over: Partial<OperatorUsageRow>): OperatorUsageRow => ({
  images: 2,
  failed: 1,
  unpricedImages: 1,
  creditsCharged: 9,
  creditsRefunded: 3,
  upstreamCostUsd: 0.025,
  revenueUsd: 0.06,
  marginUsd: 0.035,
  ...over,
});

describe('the usage report as CSV', () => {
  it('one header line, the group column first, one CRLF line per row; fields quoted as RFC 4180 asks', () => {
    const csv = usageReportCsv([row({ route: 'fal/fal-ai/flux/dev' }), row({ route: 'a "b", c' }), row({ route: null })], 'route');
    expect(csv.split('\r\n')).toEqual([
      'route,images,failed,unpricedImages,creditsCharged,creditsRefunded,upstreamCostUsd,revenueUsd,marginUsd',
      'fal/fal-ai/flux/dev,2,1,1,9,3,0.025,0.06,0.035',
      '"a ""b"", c",2,1,1,9,3,0.025,0.06,0.035',
      ',2,1,1,9,3,0.025,0.06,0.035',
      '',
    ]);
  });

  it('groupBy takes route and key; anything else is invalid_request', () => {
    expect(parseUsageWindow({ groupBy: 'route' }, '2026-11-28').groupBy).toBe('route');
    expect(parseUsageWindow({ groupBy: 'key' }, '2026-11-28').groupBy).toBe('key');
    expect(() => parseUsageWindow({ groupBy: 'provider' }, '2026-11-28')).toThrow(/groupBy must be one of day, model, account, route, key/);
  });
});

import * as fs from 'node:fs';
import * as path from 'node:path';
import { KilnMetrics } from '@app/metrics';

/** The dashboard must only chart metrics Kiln exports, or a rename would leave panels empty. */
describe('docker/grafana-dashboard.json', () => {
  const dashboard = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../docker/grafana-dashboard.json'), 'utf8'));
  const exprs: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) => p.targets.map((t) => t.expr));

  it('uses only names the metrics registry declares', async () => {
    const metrics = new KilnMetrics();
    const declared = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
    const used = new Set(
      exprs.flatMap((e) => e.match(/\b(?:kiln|process)_[a-z_]+/g) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')),
    );
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((n) => !declared.has(n))).toEqual([]);
    metrics.onModuleDestroy();
  });

  it('charts what the upstreams cost, by model and provider (operators only: Grafana is theirs)', () => {
    const cost = dashboard.panels.find((p: { targets: { expr: string }[] }) =>
      p.targets.some((t) => t.expr.includes('kiln_upstream_cost_usd_total')),
    );
    expect(cost).toBeDefined();
    expect(cost.fieldConfig.defaults.unit).toBe('currencyUSD');
    expect(cost.targets[0].expr).toMatch(/sum by \(model, provider\)/);
  });

  it('charts the economy tier: tasks waiting for an upstream batch, batches by state, lines by outcome', () => {
    const charted = (name: string) => exprs.some((e) => e.includes(name));
    expect(['kiln_economy_tasks_waiting', 'kiln_economy_upstream_batches', 'kiln_economy_lines_total'].filter((n) => !charted(n))).toEqual(
      [],
    );
    expect(exprs.find((e) => e.includes('kiln_economy_lines_total'))).toMatch(/by \(model, outcome\)/);
  });

  it("charts each route's circuit state and the failovers between routes", () => {
    expect(exprs.find((e) => e.includes('kiln_route_circuit_state'))).toMatch(/by \(model, route\)/);
    expect(exprs.find((e) => e.includes('kiln_route_failover_total'))).toMatch(/by \(model, from, to, reason\)/);
  });
});

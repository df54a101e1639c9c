import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const DAY = 86_400;

/**
 * A daily chart of one measure (images or credits): bars on one y-axis, every bar whole (the
 * x range runs half a day past the first and last), and the legend showing the last day's
 * figure at rest, the hovered day's under the cursor.
 */
export function drawUsageChart(el: HTMLElement, series: { days: string[]; values: number[]; label: string; color: string }): uPlot {
  const xs = series.days.map((d) => Date.parse(d + 'T00:00:00Z') / 1000);
  const last = xs.length - 1;
  const restOnLastDay = (u: uPlot) => {
    if (u.legend.idx == null) u.setLegend({ idx: last });
  };
  // The last bar's right edge against the plot's, for the test that nothing is clipped.
  const barRight = (u: uPlot) => {
    const half = (u.valToPos(xs[0] + DAY, 'x') - u.valToPos(xs[0], 'x')) * 0.35;
    el.dataset.lastBarRight = String(Math.round(u.valToPos(xs[last], 'x') + half));
    el.dataset.plotRight = String(Math.round(u.bbox.width / devicePixelRatio));
  };
  const opts: uPlot.Options = {
    width: el.clientWidth,
    height: 240,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: {
      x: { time: true, range: () => [xs[0] - DAY / 2, xs[last] + DAY / 2] },
      y: { auto: true, range: (_u, _min, max) => [0, Math.max(1, max)] },
    },
    // A tick a day (or every few days where they would crowd), labelled by date only.
    axes: [{ incrs: [DAY, 2 * DAY, 7 * DAY], values: '{M}/{D}', space: 44 }, { label: series.label }],
    series: [
      { label: 'Day (UTC)', value: (_u, v) => (v == null ? '' : new Date(v * 1000).toISOString().slice(0, 10)) },
      {
        label: series.label,
        stroke: series.color,
        fill: series.color + '55',
        paths: uPlot.paths.bars!({ size: [0.7, 28] }),
        points: { show: false },
      },
    ],
    hooks: { ready: [restOnLastDay, barRight], setLegend: [restOnLastDay], setSize: [barRight] },
  };
  return new uPlot(opts, [xs, series.values], el);
}

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** The 30-day chart: images (bars, left axis) and credits (line, right axis) per UTC day. */
export function drawUsageChart(el: HTMLElement, series: { days: string[]; images: number[]; credits: number[] }): uPlot {
  const xs = series.days.map((d) => Date.parse(d + 'T00:00:00Z') / 1000);
  const opts: uPlot.Options = {
    width: el.clientWidth,
    height: 260,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: { x: { time: true }, images: { auto: true, range: (_u, _min, max) => [0, Math.max(1, max)] }, credits: { auto: true, range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [
      {},
      { scale: 'images', label: 'Images' },
      { scale: 'credits', label: 'Credits', side: 1, grid: { show: false } },
    ],
    series: [
      { label: 'Day' },
      { label: 'Images', scale: 'images', stroke: '#9a3412', fill: 'rgba(154,52,18,0.25)', paths: uPlot.paths.bars!({ size: [0.6, 24] }) },
      { label: 'Credits', scale: 'credits', stroke: '#1d4ed8', width: 2 },
    ],
  };
  return new uPlot(opts, [xs, series.images, series.credits], el);
}

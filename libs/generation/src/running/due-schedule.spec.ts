import { DueSchedule } from './due-schedule';

describe('DueSchedule', () => {
  it('pops items in due order, only once due', () => {
    const s = new DueSchedule<string>();
    const order = [50, 10, 40, 10, 30, 20, 60];
    order.forEach((at, i) => s.push(at, `${at}-${i}`));
    expect(s.popDue(5)).toBeUndefined();
    const popped: string[] = [];
    for (let item = s.popDue(45); item; item = s.popDue(45)) popped.push(item);
    expect(popped.map((p) => Number(p.split('-')[0]))).toEqual([10, 10, 20, 30, 40]);
    expect(s.size).toBe(2);
    expect(s.peekAt()).toBe(50);
  });

  it('stays ordered through many random pushes and pops', () => {
    const s = new DueSchedule<number>();
    const values = Array.from({ length: 5000 }, (_, i) => (i * 7919) % 10007);
    values.forEach((v) => s.push(v, v));
    const out: number[] = [];
    for (let v = s.popDue(Infinity); v !== undefined; v = s.popDue(Infinity)) out.push(v);
    expect(out).toEqual([...values].sort((a, b) => a - b));
  });
});

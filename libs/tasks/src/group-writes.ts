import DataLoader from 'dataloader';

/**
 * Group commit for one kind of write: items that arrive while a group is being written wait
 * for it and are written together in the next one. Under load one statement carries many
 * items; when idle, an item waits only for the end of the current tick. Each round trip to
 * PostgreSQL costs this process a system call and PostgreSQL a statement, so a burst of 100
 * completions becomes a handful of statements instead of 100.
 *
 * DataLoader does the collecting (a group closes when it is dispatched, `maxGroup` splits a
 * larger one); the schedule below makes a group wait for the previous group's write instead
 * of only for the end of the tick. `write` gets the items in arrival order and returns one
 * result per item, or an Error for an item that failed alone; if it throws, every item of
 * the group rejects with that error.
 */
export function groupWrites<Item, Result>(
  write: (group: readonly Item[]) => Promise<(Result | Error)[]>,
  maxGroup: number,
): (item: Item) => Promise<Result> {
  let writing: Promise<void> | null = null;
  const loader = new DataLoader<Item, Result>(
    (group) => {
      const written = write(group);
      const settled = written.then(
        () => undefined,
        () => undefined,
      );
      writing = settled;
      void settled.then(() => {
        if (writing === settled) writing = null;
      });
      return written;
    },
    {
      cache: false,
      maxBatchSize: maxGroup,
      batchScheduleFn: (dispatch) => {
        if (writing) void writing.then(dispatch);
        else process.nextTick(dispatch);
      },
    },
  );
  return (item) => loader.load(item);
}

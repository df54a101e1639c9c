import { setMaxListeners } from 'node:events';

/** Abort listeners one in-flight run may hold on the signal at once (a slot wait, an upstream call, a sleep). */
const LISTENERS_PER_RUN = 4;

/**
 * The controller whose signal every in-flight run listens on, to be interrupted when a
 * shutdown's grace period runs out. Node warns (MaxListenersExceededWarning) past 10
 * listeners on one signal, which a generator running 50 jobs passes in normal operation;
 * the limit is set to what the job concurrency allows, so only a real leak still warns.
 */
export function shutdownInterrupter(concurrency: number): AbortController {
  const controller = new AbortController();
  setMaxListeners(Math.max(10, LISTENERS_PER_RUN * concurrency + 10), controller.signal);
  return controller;
}

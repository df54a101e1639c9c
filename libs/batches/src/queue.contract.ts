/**
 * The one contract between the api and the generator. Names are never renamed once
 * deployed (jobs already in Redis carry them); payloads carry ids, the database holds the rest.
 */
export const TASK_QUEUE = 'kiln-tasks';

export enum TaskJob {
  Render = 'render',
}

export interface RenderJobData {
  taskId: string;
}

import { applyDecorators } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiResponse } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { BatchPolling, preferredWait } from '@app/batches';
import { BatchDetailResponseDto } from './dto/batch.response.dto';

/**
 * GET /v1/batches/{id} and its dashboard twin: a conditional (If-None-Match) and long
 * (Prefer: wait=N) poll answered by BatchPolling. Written here rather than returned, since a
 * 304 has no body and the headers depend on the answer.
 */
export async function answerPoll(
  polling: BatchPolling,
  req: Request,
  res: Response,
  who: { accountId: string; batchId: string; holder: string },
): Promise<void> {
  const left = new AbortController();
  const onClose = (): void => {
    if (!res.writableEnded) left.abort();
  };
  res.on('close', onClose);
  try {
    const answer = await polling.poll({
      ...who,
      ifNoneMatch: req.headers['if-none-match'],
      waitSeconds: preferredWait(req.headers['prefer']),
      signal: left.signal,
    });
    if (left.signal.aborted) return;
    res.setHeader('ETag', answer.etag);
    if (answer.waitApplied !== null) res.setHeader('Preference-Applied', `wait=${answer.waitApplied}`);
    if (answer.notModified) {
      res.status(304).end();
    } else {
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.status(200).send(serialized(answer.detail));
    }
  } finally {
    res.off('close', onClose);
  }
}

/**
 * The polls one change releases share one read of the body (BatchPolling), and with it one
 * serialization: a thousand held polls cost one JSON.stringify, not a thousand.
 */
const bodies = new WeakMap<object, string>();
function serialized(detail: Parameters<typeof BatchDetailResponseDto.from>[0]): string {
  let body = bodies.get(detail);
  if (body === undefined) {
    body = JSON.stringify(BatchDetailResponseDto.from(detail));
    bodies.set(detail, body);
  }
  return body;
}

/** The OpenAPI description of a poll's headers and answers. */
export function ApiBatchPoll() {
  return applyDecorators(
    ApiHeader({ name: 'If-None-Match', required: false, description: 'An ETag from an earlier answer: 304 while it is current' }),
    ApiHeader({
      name: 'Prefer',
      required: false,
      description:
        'wait=N (1..60 s): hold the answer until the batch changes or N s pass (then 304 with If-None-Match, else 200). ' +
        'A done batch answers at once; past 20 held requests per key the request answers at once.',
      example: 'wait=30',
    }),
    ApiOkResponse({
      type: BatchDetailResponseDto,
      headers: {
        ETag: { description: 'Weak; changes whenever anything in the body does', schema: { type: 'string', example: 'W/"1f0c...-42"' } },
        'Preference-Applied': { description: 'wait=N when Prefer: wait was honoured', schema: { type: 'string', example: 'wait=30' } },
      },
    }),
    ApiResponse({ status: 304, description: 'Not modified: If-None-Match holds the current ETag (no body)' }),
  );
}

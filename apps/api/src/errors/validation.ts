import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { invalidRequest } from '@app/errors';
import { findUncleanText } from './clean-text';

/** The first failing field as a path such as `prompts` or `provider.latencyMs`. */
function firstFailure(errors: ValidationError[], parent = ''): { field: string; reason: string; message: string } | null {
  for (const e of errors) {
    const field = parent ? (/^\d+$/.test(e.property) ? `${parent}[${e.property}]` : `${parent}.${e.property}`) : e.property;
    if (e.constraints && Object.keys(e.constraints).length > 0) {
      const [name, message] = Object.entries(e.constraints)[0];
      return { field, reason: name === 'whitelistValidation' ? 'unknown_field' : name, message };
    }
    const nested = firstFailure(e.children ?? [], field);
    if (nested) return nested;
  }
  return null;
}

/**
 * Every body, query and route parameter meets the clean-text rule before its DTO is checked:
 * one rule for every route (public, dashboard and admin), free-form objects such as a
 * model's provider route included, so no DTO can forget it.
 */
class KilnValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type !== 'custom') {
      const unclean = findUncleanText(value, metadata.type === 'body' || !metadata.data ? '' : metadata.data);
      if (unclean) {
        const what = unclean.reason === 'contains_nul' ? 'U+0000' : 'an unpaired UTF-16 surrogate';
        throw invalidRequest(unclean.field || metadata.type, unclean.reason, `${unclean.field || metadata.type} contains ${what}`);
      }
    }
    return super.transform(value, metadata);
  }
}

/** class-validator failures become `invalid_request` with `{ field, reason }` details. */
export function kilnValidationPipe(): ValidationPipe {
  return new KilnValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    stopAtFirstError: true,
    exceptionFactory: (errors) => {
      const f = firstFailure(errors) ?? { field: 'body', reason: 'invalid', message: 'Invalid request' };
      return invalidRequest(f.field, f.reason, f.message);
    },
  });
}

import { ValidationError, ValidationPipe } from '@nestjs/common';
import { invalidRequest } from '@app/errors';

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

/** class-validator failures become `invalid_request` with `{ field, reason }` details. */
export function kilnValidationPipe(): ValidationPipe {
  return new ValidationPipe({
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

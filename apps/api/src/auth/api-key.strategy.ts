import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { Strategy } from 'passport-http-bearer';
import { AuthenticatedKey, KeysService } from '@app/keys';

/** `Authorization: Bearer kiln_live_...` -> key, account and plan, or a KilnError. */
@Injectable()
export class ApiKeyStrategy extends PassportStrategy(Strategy, 'api-key') {
  constructor(private readonly keys: KeysService) {
    super();
  }

  validate(token: string): Promise<AuthenticatedKey> {
    return this.keys.authenticate(token);
  }
}

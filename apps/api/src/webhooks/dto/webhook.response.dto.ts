import { ApiProperty } from '@nestjs/swagger';
import { WEBHOOK_EVENT_TYPES, WebhookDelivery, WebhookEndpoint } from '@app/webhooks';
import { WEBHOOK_DELIVERY_STATUSES } from '@app/database';

export class WebhookEndpointDto {
  @ApiProperty() id: string;
  @ApiProperty({ example: 'https://example.com/kiln-webhooks' }) url: string;
  @ApiProperty({ enum: WEBHOOK_EVENT_TYPES, isArray: true, example: ['batch.completed'] }) events: string[];
  @ApiProperty({ type: 'string', nullable: true }) description: string | null;
  @ApiProperty({ type: 'integer', description: 'Unix milliseconds' }) createdAt: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix milliseconds; set when a delivery was answered 410 Gone' })
  disabledAt: number | null;
  @ApiProperty({ type: 'integer', description: 'Delivery attempts in a row that failed; 0 after any success' })
  consecutiveFailures: number;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description:
      'Unix milliseconds; set while the circuit is open (the endpoint failed every attempt lately): deliveries wait, then one probe attempt',
  })
  circuitOpenUntil: number | null;

  static from(e: WebhookEndpoint): WebhookEndpointDto {
    return {
      id: e.id,
      url: e.url,
      events: e.events,
      description: e.description,
      createdAt: e.createdAt.getTime(),
      disabledAt: e.disabledAt ? e.disabledAt.getTime() : null,
      consecutiveFailures: e.consecutiveFailures,
      circuitOpenUntil: e.circuitOpenUntil && e.circuitOpenUntil.getTime() > Date.now() ? e.circuitOpenUntil.getTime() : null,
    };
  }
}

export class CreatedWebhookResponseDto {
  @ApiProperty({ type: WebhookEndpointDto }) endpoint: WebhookEndpointDto;
  @ApiProperty({ example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', description: 'Shown only in this response' }) secret: string;
}

export class WebhookListResponseDto {
  @ApiProperty({ type: [WebhookEndpointDto] }) endpoints: WebhookEndpointDto[];
}

export class WebhookSecretResponseDto {
  @ApiProperty({ example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', description: 'The new secret; the previous one also signs for 24 h' })
  secret: string;
}

export class WebhookDeliveryDto {
  @ApiProperty({
    description: 'The event id: the webhook-id header, the same on every attempt',
    example: 'evt_6c1f0d0e8a3b4f0c9d1e2f3a4b5c6d7e',
  })
  id: string;
  @ApiProperty({ enum: WEBHOOK_EVENT_TYPES }) type: string;
  @ApiProperty({ type: 'integer' }) attempts: number;
  @ApiProperty({ enum: WEBHOOK_DELIVERY_STATUSES }) status: string;
  @ApiProperty({ type: 'integer', nullable: true }) lastStatusCode: number | null;
  @ApiProperty({ type: 'string', nullable: true }) lastError: string | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix milliseconds' }) nextAttemptAt: number | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix milliseconds' }) deliveredAt: number | null;

  static from(d: WebhookDelivery): WebhookDeliveryDto {
    return {
      id: d.eventId,
      type: d.type,
      attempts: d.attempts,
      status: d.status,
      lastStatusCode: d.lastStatusCode,
      lastError: d.lastError,
      nextAttemptAt: d.status === 'pending' && d.nextAttemptAt ? d.nextAttemptAt.getTime() : null,
      deliveredAt: d.deliveredAt ? d.deliveredAt.getTime() : null,
    };
  }
}

export class WebhookDeliveryResponseDto {
  @ApiProperty({ type: WebhookDeliveryDto }) delivery: WebhookDeliveryDto;
}

export class WebhookDeliveryListResponseDto {
  @ApiProperty({ type: WebhookEndpointDto, description: 'The endpoint, with its circuit' }) endpoint: WebhookEndpointDto;
  @ApiProperty({ type: [WebhookDeliveryDto], description: 'Newest first' }) deliveries: WebhookDeliveryDto[];
  @ApiProperty({ type: 'string', nullable: true, description: 'Pass as `cursor` for the next page; null on the last page' })
  nextCursor: string | null;
}

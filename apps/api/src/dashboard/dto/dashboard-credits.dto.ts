import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength } from 'class-validator';

export class CheckoutRequestDto {
  @ApiProperty({
    format: 'uuid',
    example: '3f6c2a9e-8b1d-4c5e-9f7a-1b2c3d4e5f60',
    description: 'A pack from GET /v1/dashboard/credit-packs',
  })
  @IsString()
  @MaxLength(100)
  packId: string;
}

export class CheckoutResponseDto {
  @ApiProperty({ example: 'https://checkout.example.com/c/pay/cs_test_a1b2c3', description: "Stripe's Checkout page: send the buyer here" })
  url: string;
  @ApiProperty({ example: 'cs_test_a1b2c3', description: "Stripe's Checkout Session id (also in the success URL's session_id)" })
  sessionId: string;
}

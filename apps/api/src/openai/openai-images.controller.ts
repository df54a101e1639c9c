import { Body, Controller, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import {
  ApiBody,
  ApiConsumes,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiProperty,
  ApiPropertyOptional,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import type { Request, Response } from 'express';
import multer from 'multer';
import { promises as fs } from 'node:fs';
import { keyActor, OpenAiImageRequest, OpenAiImagesAnswer, OpenAiImagesService } from '@app/batches';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import type { IdempotentRequest } from '@app/idempotency';
import { invalidRequest } from '@app/errors';
import { AuthenticatedKey } from '@app/keys';
import { UPLOAD_LIMITS, UploadsService } from '@app/uploads';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { Idempotency } from '../batches/idempotency.decorators';
import { ErrorResponseDto } from '../common/error.response.dto';
import { incomingDir, toUploadError } from '../uploads/upload-files.interceptor';

/** `POST /v1/images/generations`: OpenAI's Images API body; fields Kiln does not use are accepted and ignored. */
export class OpenAiGenerationRequestDto implements OpenAiImageRequest {
  @ApiProperty({
    description: 'A Kiln model key (GET /v1/models), or an OpenAI name an operator gave a model (openaiAliases)',
    example: 'eta-image',
  })
  @IsString()
  model: string;
  @ApiProperty({ example: 'a red fox in the snow' }) @IsString() @MaxLength(32000) prompt: string;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 10, default: 1 }) @IsOptional() @Max(10) @Min(1) @IsInt() n?: number;
  @ApiPropertyOptional({ description: 'WxH: the legal size nearest to it; or auto', example: '1024x1024' })
  @IsOptional()
  @IsString()
  size?: string;
  @ApiPropertyOptional({ enum: ['auto', 'low', 'medium', 'high', 'standard', 'hd'] }) @IsOptional() @IsString() quality?: string;
  @ApiPropertyOptional({ enum: ['auto', 'transparent', 'opaque'] })
  @IsOptional()
  @IsIn(['auto', 'transparent', 'opaque'])
  background?: string;
  @ApiPropertyOptional({ enum: ['png', 'jpeg', 'webp'] }) @IsOptional() @IsString() output_format?: string;
  @ApiPropertyOptional({ enum: ['url', 'b64_json'], default: 'url' }) @IsOptional() @IsString() response_format?: string;
  @ApiPropertyOptional({ description: 'Ignored' }) @IsOptional() @IsString() user?: string;
  @ApiPropertyOptional({ description: 'Ignored' }) @IsOptional() @IsString() style?: string;
  @ApiPropertyOptional({ description: 'Ignored' }) @IsOptional() @IsString() moderation?: string;
  @ApiPropertyOptional({ description: 'Ignored' }) @IsOptional() @Type(() => Number) @IsInt() output_compression?: number;
}

class OpenAiImageDataDto {
  @ApiPropertyOptional({ description: 'With response_format url (the default): the public result URL' }) url?: string;
  @ApiPropertyOptional({ description: 'With response_format b64_json: the image, base64' }) b64_json?: string;
}

export class OpenAiImagesResponseDto {
  @ApiProperty({ type: 'integer', description: 'Unix seconds of the batch creation', example: 1795427062 }) created: number;
  @ApiProperty({ type: [OpenAiImageDataDto], description: 'One per succeeded image, in fan-out order' }) data: OpenAiImageDataDto[];
  @ApiProperty({ description: 'WxH of the images as made and stored', example: '1536x1024' }) size: string;
  @ApiPropertyOptional({
    enum: ['low', 'medium', 'high'],
    description: 'The quality the upstream was given; absent when the model takes none or it was auto',
  })
  quality?: 'low' | 'medium' | 'high';
  @ApiProperty({ enum: ['png', 'jpeg', 'webp'] }) output_format: 'png' | 'jpeg' | 'webp';
  @ApiProperty({ enum: ['transparent', 'opaque'], description: 'transparent only when asked of a model that makes it' })
  background: 'transparent' | 'opaque';
}

/** Image files of an edit: OpenAI's SDKs send `image[]` for several, `image` for one; a mask is ignored. */
const EDIT_FILE_FIELDS = [
  { name: 'image[]', maxCount: UPLOAD_LIMITS.maxFiles },
  { name: 'image', maxCount: UPLOAD_LIMITS.maxFiles },
  { name: 'mask', maxCount: 1 },
];

/**
 * The OpenAI-compatible door (docs/api.md#openai-compatible-images): OpenAI's SDKs work
 * against Kiln with baseURL = Kiln's /v1 and a Kiln API key. Each request is an ordinary
 * batch; the answer waits for it, with TCP keep-alive on so idle proxies keep the line.
 * Errors carry x-should-retry: false where asking again cannot help (errors/error.filter.ts).
 */
@ApiTags('OpenAI-compatible')
@Controller('images')
export class OpenAiImagesController {
  private readonly parseEdit;

  constructor(
    private readonly images: OpenAiImagesService,
    private readonly uploads: UploadsService,
    @Inject(KILN_CONFIG) config: KilnConfig,
  ) {
    this.parseEdit = multer({
      storage: multer.diskStorage({ destination: incomingDir(config) }),
      defParamCharset: 'utf8',
      limits: { fileSize: UPLOAD_LIMITS.maxBytes, files: UPLOAD_LIMITS.maxFiles + 1, fields: 30, fieldSize: 64 * 1024 },
    }).fields(EDIT_FILE_FIELDS);
  }

  @Post('generations')
  @HttpCode(200)
  @ApiKeyAuth('batches:write')
  @ApiOperation({
    operationId: 'createOpenAiImage',
    summary: "OpenAI's images.generate: makes a batch, waits for it, answers { created, data, size, quality, output_format, background }",
  })
  @ApiOkResponse({ type: OpenAiImagesResponseDto })
  @ApiResponse({
    status: 400,
    description:
      "moderation_blocked (type image_generation_user_error): the content policy, Kiln's or the upstream's, refused the prompt (refunded); invalid_request, unknown_model...",
    type: ErrorResponseDto,
  })
  @ApiResponse({ status: 402, description: 'insufficient_credits, daily_credit_cap_exceeded', type: ErrorResponseDto })
  @ApiResponse({
    status: 502,
    description: 'generation_failed: no image succeeded (refunded); details.batchId, details.retryable',
    type: ErrorResponseDto,
  })
  @ApiResponse({
    status: 504,
    description: 'generation_timeout: not done within OPENAI_COMPAT_WAIT_MS; details.batchId, still running',
    type: ErrorResponseDto,
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      'As on POST /v1/batches (kept 24 h per account): a retry with the same key and body waits for the batch the first request made ' +
      'and answers from it, charging nothing again; the same key with another body is idempotency_key_reused (422)',
    example: 'render-4711',
  })
  async generate(
    @CurrentKey() auth: AuthenticatedKey,
    @Body() body: OpenAiGenerationRequestDto,
    @Req() req: Request,
    @Idempotency('POST /v1/images/generations') idempotency: IdempotentRequest | null,
  ): Promise<OpenAiImagesAnswer> {
    return this.images.generate(keyActor(auth), body, [], keepAlive(req), idempotency);
  }

  @Post('edits')
  @HttpCode(200)
  @ApiKeyAuth('batches:write')
  @ApiOperation({
    operationId: 'editOpenAiImage',
    summary: "OpenAI's images.edit: the image[] files are the batch's references (combined); otherwise as generations",
  })
  @ApiConsumes('multipart/form-data')
  @ApiBody({
    schema: {
      type: 'object',
      required: ['image[]', 'prompt', 'model'],
      properties: {
        'image[]': { type: 'array', items: { type: 'string', format: 'binary' }, description: 'Reference images (or one in "image")' },
        prompt: { type: 'string' },
        model: { type: 'string' },
        n: { type: 'integer', minimum: 1, maximum: 10 },
        size: { type: 'string' },
        quality: { type: 'string' },
        background: { type: 'string' },
        output_format: { type: 'string' },
        response_format: { type: 'string', enum: ['url', 'b64_json'] },
      },
    },
  })
  @ApiOkResponse({ type: OpenAiImagesResponseDto })
  @ApiResponse({
    status: 400,
    description:
      "moderation_blocked (type image_generation_user_error): the content policy, Kiln's or the upstream's, refused the prompt (refunded); invalid_request, unknown_model...",
    type: ErrorResponseDto,
  })
  @ApiResponse({ status: 402, description: 'insufficient_credits, daily_credit_cap_exceeded', type: ErrorResponseDto })
  @ApiResponse({
    status: 502,
    description: 'generation_failed: no image succeeded (refunded); details.batchId, details.retryable',
    type: ErrorResponseDto,
  })
  @ApiResponse({
    status: 504,
    description: 'generation_timeout: not done within OPENAI_COMPAT_WAIT_MS; details.batchId, still running',
    type: ErrorResponseDto,
  })
  async edit(
    @CurrentKey() auth: AuthenticatedKey,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<OpenAiImagesAnswer> {
    if (!req.is('multipart/form-data')) throw invalidRequest('body', 'not_multipart', 'Send images.edit as multipart/form-data');
    await new Promise<void>((resolve, reject) =>
      this.parseEdit(req, res, (error?: unknown) => (error ? reject(toUploadError(error)) : resolve())),
    );
    const files = Object.entries((req.files ?? {}) as Record<string, Express.Multer.File[]>)
      .filter(([field]) => field !== 'mask')
      .flatMap(([, list]) => list);
    try {
      if (files.length === 0) throw invalidRequest('image', 'no_files', 'images.edit needs at least one image');
      const stored = await this.uploads.store(
        auth.account.id,
        files.map((f) => ({ name: f.originalname, path: f.path, bytes: f.size })),
      );
      return await this.images.generate(
        keyActor(auth),
        editRequest(req.body as Record<string, string>),
        stored.map((s) => s.url),
        keepAlive(req),
      );
    } finally {
      await Promise.all(
        Object.values((req.files ?? {}) as Record<string, Express.Multer.File[]>)
          .flat()
          .map((f) => fs.rm(f.path, { force: true }).catch(() => undefined)),
      );
    }
  }
}

/** The text fields of a multipart edit, checked as the JSON body's would be. */
function editRequest(fields: Record<string, string>): OpenAiImageRequest {
  for (const name of ['model', 'prompt'] as const) {
    if (typeof fields[name] !== 'string' || fields[name] === '') throw invalidRequest(name, 'isString', `${name} is required`);
  }
  const n = fields.n === undefined ? undefined : Number(fields.n);
  if (n !== undefined && (!Number.isInteger(n) || n < 1 || n > 10))
    throw invalidRequest('n', 'out_of_range', 'n must be an integer from 1 to 10');
  return { ...fields, model: fields.model, prompt: fields.prompt, n };
}

/**
 * The wait may be long: TCP keep-alive probes keep proxies and NATs from dropping the idle
 * connection, and the signal stops waiting when the client leaves.
 */
function keepAlive(req: Request): AbortSignal {
  req.socket.setKeepAlive(true, 15_000);
  const gone = new AbortController();
  req.res?.once('close', () => {
    if (!req.res?.writableFinished) gone.abort();
  });
  return gone.signal;
}

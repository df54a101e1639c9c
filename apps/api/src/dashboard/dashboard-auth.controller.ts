import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiResponse, ApiSecurity, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { AuthenticatedSession, IssuedSession, SessionsService } from '@app/sessions';
import { clientIp } from '../auth/client-ip';
import { ErrorResponseDto } from '../common/error.response.dto';
import { LoginRequestDto, SignupRequestDto } from './dto/dashboard.request.dto';
import { SessionResponseDto } from './dto/dashboard.response.dto';
import { LoginThrottle } from './login-throttle.service';
import { clearSessionCookie, setSessionCookie, wantsCookieSession } from './session-cookie';
import { CurrentSession, SessionAuth } from './session.decorators';

/** Signup and login take no credential: `security: [{}]` says so in the document (anonymous allowed). */
const NoCredential = () => ApiSecurity({});

@ApiTags('Dashboard')
@Controller('dashboard')
export class DashboardAuthController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly throttle: LoginThrottle,
  ) {}

  @Post('signup')
  @NoCredential()
  @ApiOperation({ operationId: 'createDashboardAccount', summary: 'Create an account (free plan, zero balance) and sign in' })
  @ApiCreatedResponse({ type: SessionResponseDto })
  @ApiResponse({ status: 400, description: 'invalid_request (email, password of 10..200 characters)', type: ErrorResponseDto })
  @ApiResponse({ status: 409, description: 'email_taken (emails compare case-insensitively)', type: ErrorResponseDto })
  @ApiResponse({ status: 429, description: 'rate_limited; honour Retry-After', type: ErrorResponseDto })
  async signup(
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
    @Body() body: SignupRequestDto,
  ): Promise<SessionResponseDto | CookieSessionResponse> {
    await this.throttle.signup(clientIp(req), res);
    return answerSession(req, res, await this.sessions.signup(body.email, body.password));
  }

  @Post('login')
  @HttpCode(200)
  @NoCredential()
  @ApiOperation({ operationId: 'createDashboardSession', summary: 'Sign in with email and password' })
  @ApiOkResponse({ type: SessionResponseDto })
  @ApiResponse({ status: 400, description: 'invalid_request', type: ErrorResponseDto })
  @ApiResponse({ status: 401, description: 'invalid_credentials (unknown email or wrong password alike)', type: ErrorResponseDto })
  @ApiResponse({ status: 403, description: 'account_disabled', type: ErrorResponseDto })
  @ApiResponse({
    status: 429,
    description: 'rate_limited (attempts per IP, failures per email and IP, failures per email per hour); honour Retry-After',
    type: ErrorResponseDto,
  })
  async login(
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
    @Body() body: LoginRequestDto,
  ): Promise<SessionResponseDto | CookieSessionResponse> {
    const session = await this.throttle.login(clientIp(req), body.email, res, () => this.sessions.login(body.email, body.password));
    return answerSession(req, res, session);
  }

  @Post('logout')
  @HttpCode(204)
  @SessionAuth()
  @ApiOperation({ operationId: 'deleteDashboardSession', summary: 'End this session; its token is refused from the next request on' })
  @ApiNoContentResponse()
  async logout(
    @CurrentSession() auth: AuthenticatedSession,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<void> {
    await this.sessions.logout(auth.session.id);
    clearSessionCookie(req, res);
  }
}

/** The token in the body, or (X-Kiln-Session: cookie, the web app) in an HttpOnly cookie only. */
function answerSession(req: Request, res: Response, session: IssuedSession): SessionResponseDto | CookieSessionResponse {
  if (!wantsCookieSession(req)) return SessionResponseDto.from(session);
  setSessionCookie(req, res, session);
  return { expiresAt: session.expiresAt.getTime() };
}

type CookieSessionResponse = Omit<SessionResponseDto, 'token'>;

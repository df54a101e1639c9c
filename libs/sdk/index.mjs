// The ES module entry of @kiln/sdk: the CommonJS build re-exported by name, so `import` and
// `require` share one copy (one KilnApiError class for instanceof checks).
import sdk from './dist/index.js';

export const {
  Kiln,
  SDK_VERSION,
  resultFileName,
  SseParser,
  KilnApiError,
  KilnConnectionError,
  KilnWebhookVerificationError,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
} = sdk;
export default sdk;

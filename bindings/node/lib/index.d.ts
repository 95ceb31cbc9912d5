// Types of pyroscope-native (the @pyroscope/nodejs 0.6.4 API plus our additions).

/** Numbers, booleans and bigints are sent as strings; null/undefined drop the label. */
export type LabelSet = Record<string, string | number | boolean | bigint | null | undefined>;
export type TagList = LabelSet;
export type StripFilenamesMode = 'all' | 'dependencies';

export interface PyroscopeWallConfig {
  /** Accepted for compatibility; the period is uploadInterval / flushIntervalMs. */
  samplingDurationMs?: number | undefined;
  /** Sampling interval; the same setting as sampleRate (1e6 / micros Hz). */
  samplingIntervalMicros?: number | undefined;
  /** Wall profiles also carry a cpu value per sample. */
  collectCpuTime?: boolean | undefined;
}

export interface PyroscopeHeapConfig {
  /** The same setting as memoryInterval (give one). */
  samplingIntervalBytes?: number | undefined;
  stackDepth?: number | undefined;
}

export interface PyroscopeConfig {
  // The anchor's options (@pyroscope/nodejs 0.6.4).
  appName?: string | undefined;
  authToken?: string | undefined;
  /** The upload period in ms; the same setting as uploadInterval (give one). */
  flushIntervalMs?: number | undefined;
  heap?: PyroscopeHeapConfig | undefined;
  serverAddress?: string | undefined;
  tags?: Record<string, string | number> | undefined;
  wall?: PyroscopeWallConfig | undefined;
  sourceMapper?: SourceMapper | undefined;
  basicAuthUser?: string | undefined;
  basicAuthPassword?: string | undefined;
  tenantID?: string | undefined;
  stripFilenames?: StripFilenamesMode | undefined;
  shortenPaths?: boolean | undefined;

  // Settings shared by every pyroscope-native binding.
  applicationName?: string | undefined;
  basicAuthUsername?: string | undefined;
  tenantId?: string | undefined;
  /** Hz, default 100. */
  sampleRate?: number | undefined;
  /** Seconds (number) or a duration string ("10s", "500ms", "1m"); default 10 s. */
  uploadInterval?: number | string | undefined;
  /** true (default): start() profiles on-CPU time; false: wall-clock time. */
  oncpu?: boolean | undefined;
  httpHeaders?: Record<string, string> | undefined;
  /** Write profiles (and a flame graph) to this folder. */
  outputDir?: string | undefined;
  reportPid?: boolean | undefined;
  reportThreadId?: boolean | undefined;
  reportThreadName?: boolean | undefined;
  logLevel?: 'debug' | 'info' | 'warning' | 'error' | 'off' | number | undefined;
  maxStacks?: number | undefined;
  maxDepth?: number | undefined;
  /** Seconds (or a duration string) stop() may take to export the last period; default 5. */
  stopTimeout?: number | string | undefined;
  faultGuard?: boolean | undefined;
  otlpEndpoint?: string | undefined;
  otlpHeaders?: Record<string, string> | undefined;
  resourceAttributes?: string | undefined;
  samplerCpuBudget?: number | undefined;
  /** Labels the server cannot take throw (naming the key) instead of being fixed; default false. */
  strictLabels?: boolean | undefined;
  /** start() runs the heap profile (inuse_objects, inuse_space) unless false; default: runs it. */
  memory?: boolean | undefined;
  /** Mean bytes allocated between heap samples, default 524288; the same setting as
   *  heap.samplingIntervalBytes (give one). */
  memoryInterval?: number | undefined;
}

export interface Logger {
  error(...args: Array<{}>): void;
  trace(...args: Array<{}>): void;
  debug(...args: Array<{}>): void;
  info(...args: Array<{}>): void;
  warn(...args: Array<{}>): void;
  fatal(...args: Array<{}>): void;
}

export interface GeneratedLocation {
  file: string;
  name?: string;
  line: number;
  column: number;
}

export interface SourceLocation {
  file?: string;
  name?: string;
  line?: number;
  column?: number;
}

export declare class SourceMapper {
  infoMap: Map<string, { mapFileDir: string; mapConsumer: unknown }>;
  debug: boolean;
  static create(searchDirs: string[], debug?: boolean): Promise<SourceMapper>;
  constructor(debug?: boolean);
  hasMappingInfo(inputPath: string): boolean;
  mappingInfo(location: GeneratedLocation): SourceLocation;
}

export interface ExpressRequest {
  method: string;
  path: string;
  query: Record<string, unknown>;
}
export interface ExpressResponse {
  status(code: number): this;
  send(body: unknown): this;
  sendStatus(code: number): this;
}
export type ExpressNextFunction = (err?: unknown) => void;
export interface FastifyReply {
  status(code: number): this;
  type(contentType: string): this;
  send(payload?: unknown): this;
}
export interface FastifyInstance {
  get(path: string, handler: (request: { query: unknown }, reply: FastifyReply) => unknown): void;
}
export type FastifyPluginCallback = (
  instance: FastifyInstance, options: Record<string, unknown>, done: (err?: Error) => void) => void;

export interface PyroscopeSpanProcessorOptions {
  /** true (default): label local root spans only; false: every span with its own id. */
  rootSpanOnly?: boolean;
}

/** An OpenTelemetry SpanProcessor (@opentelemetry/sdk-trace-base 2.x). */
export declare class PyroscopeSpanProcessor {
  constructor(options?: PyroscopeSpanProcessorOptions);
  readonly rootSpanOnly: boolean;
  /** onStart/onEnd failures (each one logged). */
  errors: number;
  /** Spans given their own span_id label. */
  labelled: number;
  onStart(span: unknown, parentContext: unknown): void;
  onEnd(span: unknown): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

export declare function init(config?: PyroscopeConfig): void;
export declare function start(): void;
export declare function stop(): Promise<void>;
export declare function flush(timeoutSeconds?: number): Promise<boolean>;
export declare function getLabels(): Record<string, string>;
export declare function setLabels(labels: LabelSet): void;
/** Deprecated (as in the anchor): getLabels. */
export declare function getWallLabels(): Record<string, string>;
/** Deprecated (as in the anchor): setLabels. */
export declare function setWallLabels(labels: LabelSet): void;
/** Runs fn(...args) with the labels, across its awaits; returns what fn returns. */
export declare function wrapWithLabels<A extends unknown[], R>(
  labels: LabelSet, fn: (...args: A) => R, ...args: A): R;
export declare function startCpuProfiling(): void;
export declare function stopCpuProfiling(): Promise<void>;
export declare function startWallProfiling(): void;
export declare function stopWallProfiling(): Promise<void>;
export declare function startHeapProfiling(): void;
export declare function stopHeapProfiling(): Promise<void>;
export declare function setLogger(logger: Logger): void;
export declare function expressMiddleware(): (
  req: ExpressRequest, res: ExpressResponse, next: ExpressNextFunction) => void;
export declare function fastifyMiddleware(): FastifyPluginCallback;
export declare function stats(): Record<string, number>;
export declare function isRunning(): boolean;

/** Label selection of a report: {key: value | values} or "key=value" strings. */
export type ReportSelection = Record<string, string | number | Array<string | number>> | string[];
export interface ReportOptions {
  /** Flame graph page to write (default flamegraph.html in the first folder; null: none). */
  output?: string | null;
  title?: string;
  /** Only samples with these labels (different keys all match, values of one key any). */
  filter?: ReportSelection;
  /** text starts with the total per value of this label. */
  groupBy?: string;
  /** Functions in the top table (default 20; 0: none). */
  top?: number;
  /** Compare selection a with selection b (top functions by change of self share). */
  diff?: [ReportSelection, ReportSelection];
}
export interface ReportResult {
  profiles: number;
  output: string | null;
  text: string;
}
/** Reads .pb/.pb.gz profiles (files or folders) and writes a flame graph page. */
export declare function writeReport(paths: string | string[], options?: ReportOptions): Promise<ReportResult>;

declare const _default: {
  SourceMapper: typeof SourceMapper;
  expressMiddleware: typeof expressMiddleware;
  fastifyMiddleware: typeof fastifyMiddleware;
  init: typeof init;
  getWallLabels: typeof getWallLabels;
  setWallLabels: typeof setWallLabels;
  getLabels: typeof getLabels;
  setLabels: typeof setLabels;
  wrapWithLabels: typeof wrapWithLabels;
  start: typeof start;
  startHeapProfiling: typeof startHeapProfiling;
  startWallProfiling: typeof startWallProfiling;
  startCpuProfiling: typeof startCpuProfiling;
  stop: typeof stop;
  stopHeapProfiling: typeof stopHeapProfiling;
  stopWallProfiling: typeof stopWallProfiling;
  stopCpuProfiling: typeof stopCpuProfiling;
  setLogger: typeof setLogger;
  flush: typeof flush;
  stats: typeof stats;
  isRunning: typeof isRunning;
  writeReport: typeof writeReport;
  PyroscopeSpanProcessor: typeof PyroscopeSpanProcessor;
};
export default _default;

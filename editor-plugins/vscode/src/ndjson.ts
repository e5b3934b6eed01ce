// Newline-delimited JSON framing for vscode-jsonrpc: `kiln mcp` speaks MCP's stdio transport (one
// JSON message per line), not LSP's Content-Length headers that vscode-jsonrpc's stream classes expect.
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

import { AbstractMessageReader, AbstractMessageWriter, Disposable } from 'vscode-jsonrpc/node';
import type { DataCallback, Message, MessageReader, MessageWriter } from 'vscode-jsonrpc/node';

/** Largest line accepted from the server before the reader gives up (kiln caps messages at 16 MiB). */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

export class NdjsonMessageReader extends AbstractMessageReader implements MessageReader {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private callback: DataCallback | undefined;

  constructor(private readonly readable: Readable) {
    super();
  }

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    const onData = (chunk: Buffer | string): void => this.onData(chunk);
    const onError = (error: Error): void => this.fireError(error);
    const onClose = (): void => {
      this.flushTail();
      this.fireClose();
    };
    this.readable.on('data', onData);
    this.readable.on('error', onError);
    this.readable.on('end', onClose);
    this.readable.on('close', onClose);
    return Disposable.create(() => {
      this.callback = undefined;
      this.readable.off('data', onData);
      this.readable.off('error', onError);
      this.readable.off('end', onClose);
      this.readable.off('close', onClose);
    });
  }

  private onData(chunk: Buffer | string): void {
    // StringDecoder keeps a multi-byte character split across chunks whole.
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let nl: number;
    while ((nl = this.pending.indexOf('\n')) >= 0) {
      const line = this.pending.slice(0, nl);
      this.pending = this.pending.slice(nl + 1);
      this.deliver(line);
    }
    if (this.pending.length > MAX_LINE_BYTES) {
      this.pending = '';
      this.fireError(new Error(`a message from the server exceeded ${MAX_LINE_BYTES} bytes without a newline`));
    }
  }

  private flushTail(): void {
    const tail = this.pending + this.decoder.end();
    this.pending = '';
    if (tail.trim() !== '') this.deliver(tail);
  }

  private deliver(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch (e) {
      this.fireError(new Error(`the server wrote a line that is not JSON: ${line.slice(0, 200)}`));
      return;
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      this.fireError(new Error(`the server wrote JSON that is not a JSON-RPC message: ${line.slice(0, 200)}`));
      return;
    }
    this.callback?.(message as Message);
  }
}

export class NdjsonMessageWriter extends AbstractMessageWriter implements MessageWriter {
  private errorCount = 0;

  constructor(private readonly writable: Writable) {
    super();
    writable.on('error', (error: Error) => this.fireError(error));
    writable.on('close', () => this.fireClose());
  }

  write(msg: Message): Promise<void> {
    // JSON.stringify never emits a raw newline, so one message is exactly one line.
    const data = JSON.stringify(msg) + '\n';
    return new Promise((resolve, reject) => {
      if (this.writable.destroyed || this.writable.writableEnded) {
        const error = new Error('the connection to the server is closed');
        this.fireError(error, msg, ++this.errorCount);
        reject(error);
        return;
      }
      this.writable.write(data, 'utf8', (error?: Error | null) => {
        if (error) {
          this.fireError(error, msg, ++this.errorCount);
          reject(error);
        } else {
          this.errorCount = 0;
          resolve();
        }
      });
    });
  }

  end(): void {
    if (!this.writable.writableEnded) this.writable.end();
  }
}

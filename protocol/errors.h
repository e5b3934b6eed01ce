// JSON-RPC 2.0 and MCP error codes in one place, so no layer spells a magic number on the wire.
#pragma once

namespace kiln::protocol {

inline constexpr int kParseError = -32700;        // the bytes were not JSON (or not UTF-8)
inline constexpr int kInvalidRequest = -32600;    // JSON, but not a valid JSON-RPC/MCP message
inline constexpr int kMethodNotFound = -32601;    // unknown method or capability not declared
inline constexpr int kInvalidParams = -32602;     // known method, unusable params
inline constexpr int kInternalError = -32603;     // a bug or an unexpected failure on our side
inline constexpr int kResourceNotFound = -32002;  // MCP 2025-11-25 resources/read of an unknown uri
// 2026-07-28 (modern era) codes, from the range MCP reserves for itself.
inline constexpr int kHeaderMismatch = -32020;               // HTTP headers disagree with the body
inline constexpr int kMissingClientCapability = -32021;      // the request needs a capability it lacks
inline constexpr int kUnsupportedProtocolVersion = -32022;   // data: {supported, requested}

}  // namespace kiln::protocol

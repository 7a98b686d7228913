#include "checkpoint/s3/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/s3/sigv4.h"
#include "checkpoint/s3/xml.h"
#include "common/logging.h"

namespace athanor {
namespace {

struct UploadCursor {
  absl::string_view data;
  size_t pos = 0;
};

size_t ReadBody(char* dst, size_t size, size_t n, void* user) {
  auto* cursor = static_cast<UploadCursor*>(user);
  size_t take = std::min(size * n, cursor->data.size() - cursor->pos);
  std::memcpy(dst, cursor->data.data() + cursor->pos, take);
  cursor->pos += take;
  return take;
}

// Where a response body goes, and how much of it may come.
struct BodySink {
  std::string* body;
  uint64_t max;
  bool over = false;  // the server announced or sent more than `max`
};

size_t WriteBody(char* src, size_t size, size_t n, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  if (sink->body->size() + size * n > sink->max) {
    sink->over = true;
    return 0;  // curl stops the transfer (CURLE_WRITE_ERROR)
  }
  sink->body->append(src, size * n);
  return size * n;
}

size_t WriteHeader(char* src, size_t size, size_t n, void* user) {
  auto* response = static_cast<S3Response*>(user);
  absl::string_view line(src, size * n);
  size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    if (name == "content-length" && response->body.empty()) {
      response->body.reserve(BodyReserveHint(value));
    }
    response->headers[name] = value;
  } else if (line.rfind("HTTP/", 0) == 0) {
    response->headers.clear();  // a new response (after 100-continue or a redirect)
  }
  return size * n;
}

bool RetryableHttp(const S3Response& r) {
  if (r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504) return true;
  if (r.status == 400 && xml::FindText(r.body, "Code") == "RequestTimeout") return true;
  // AWS can answer 200 to CompleteMultipartUpload and still fail in the body.
  if (r.status == 200 && r.body.rfind("<Error>") != std::string::npos &&
      (xml::FindText(r.body, "Code") == "InternalError" || xml::FindText(r.body, "Code") == "SlowDown")) {
    return true;
  }
  return false;
}

}  // namespace

size_t BodyReserveHint(absl::string_view content_length) {
  uint64_t n = 0;
  if (!absl::SimpleAtoi(content_length, &n)) return 0;
  return static_cast<size_t>(std::min<uint64_t>(n, kMaxBodyReserve));
}

S3Client::S3Client(S3Options options) : options_(std::move(options)) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  host_ = options_.endpoint.substr(options_.endpoint.find("://") + 3);
}

S3Client::~S3Client() {
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

int64_t S3Client::retries() const {
  absl::MutexLock lock(&mu_);
  return retries_;
}

void* S3Client::AcquireHandle() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_handles_.empty()) {
      void* h = idle_handles_.back();
      idle_handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void S3Client::ReleaseHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  idle_handles_.push_back(handle);
}

absl::StatusOr<S3Response> S3Client::SendOnce(const S3Request& req, void* handle, bool* retryable) {
  CURL* curl = static_cast<CURL*>(handle);
  curl_easy_reset(curl);
  *retryable = false;
  std::string path = absl::StrCat("/", options_.bucket);
  if (!req.key.empty()) absl::StrAppend(&path, "/", req.key);
  std::string url = absl::StrCat(options_.endpoint, sigv4::UriEncode(path, true));
  std::vector<std::string> q;
  for (const auto& [k, v] : req.query) {
    q.push_back(absl::StrCat(sigv4::UriEncode(k, false), "=", sigv4::UriEncode(v, false)));
  }
  if (!q.empty()) absl::StrAppend(&url, "?", absl::StrJoin(q, "&"));

  std::string amz_date = sigv4::AmzDate(std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  std::string payload_hash = !options_.sign_payload ? "UNSIGNED-PAYLOAD"
                             : req.body.empty()     ? sigv4::kEmptySha256
                                                    : sigv4::HexSha256(req.body);
  std::map<std::string, std::string> signed_headers = req.headers;
  signed_headers["host"] = host_;
  signed_headers["x-amz-date"] = amz_date;
  signed_headers["x-amz-content-sha256"] = payload_hash;
  if (!options_.session_token.empty()) signed_headers["x-amz-security-token"] = options_.session_token;
  sigv4::Credentials creds{options_.access_key, options_.secret_key, options_.region, "s3"};
  std::string auth = sigv4::Authorization(creds, req.method, path, req.query, signed_headers,
                                          payload_hash, amz_date);
  struct curl_slist* headers = nullptr;
  for (const auto& [k, v] : signed_headers) {
    headers = curl_slist_append(headers, absl::StrCat(k, ": ", v).c_str());
  }
  headers = curl_slist_append(headers, absl::StrCat("Authorization: ", auth).c_str());
  headers = curl_slist_append(headers, "Expect:");
  if (req.method == "POST") headers = curl_slist_append(headers, "Content-Type: application/xml");

  S3Response response;
  UploadCursor cursor{req.body, 0};
  BodySink sink{&response.body, req.max_body > 0 ? req.max_body : kMaxMetadataBody};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_seconds));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  // curl refuses a Content-Length over this before any of the body is read.
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(sink.max));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, WriteHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  if (req.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadBody);
    curl_easy_setopt(curl, CURLOPT_READDATA, &cursor);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (sink.over || rc == CURLE_FILESIZE_EXCEEDED) {
    *retryable = false;
    return absl::ResourceExhaustedError(absl::StrCat(req.method, " ", url, ": the response body is over ",
                                                     sink.max, " bytes, the most this request takes"));
  }
  if (rc != CURLE_OK) {
    *retryable = rc != CURLE_URL_MALFORMAT && rc != CURLE_UNSUPPORTED_PROTOCOL;
    std::string detail = absl::StrCat(req.method, " ", url, ": ", curl_easy_strerror(rc));
    if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(detail);
    return absl::UnavailableError(detail);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  // A connection cut inside the headers can look like a complete, empty
  // response: insist on a framing we can check.
  auto length = response.headers.find("content-length");
  bool chunked = response.headers.count("transfer-encoding") > 0;
  bool framed = req.method == "HEAD" || response.status == 204 || response.status == 304 || chunked ||
                (length != response.headers.end() &&
                 std::strtoull(length->second.c_str(), nullptr, 10) == response.body.size());
  if (response.status == 0 || !framed) {
    *retryable = true;
    return absl::UnavailableError(absl::StrCat(req.method, " ", url, ": incomplete response (HTTP ",
                                               response.status, ", ", response.body.size(), " body bytes)"));
  }
  *retryable = RetryableHttp(response);
  return response;
}

absl::StatusOr<S3Response> S3Client::Send(const S3Request& request) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  void* handle = AcquireHandle();
  absl::StatusOr<S3Response> result;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {
      int64_t cap = std::min<int64_t>(options_.retry_max_ms,
                                      static_cast<int64_t>(options_.retry_base_ms) << std::min(attempt, 20));
      int64_t wait_ms = cap > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(cap + 1)) : 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));  // backoff, not synchronisation
      absl::MutexLock lock(&mu_);
      ++retries_;
    }
    bool retryable = false;
    result = SendOnce(request, handle, &retryable);
    if (!retryable) break;
    if (request.already_applied && request.already_applied()) {
      result = S3Response{200, {}, ""};
      break;
    }
    if (result.ok()) {
      ATHANOR_LOG(DEBUG) << "s3 " << request.method << " " << request.key << ": HTTP " << result->status
                         << " " << xml::FindText(result->body, "Code") << ", retrying";
    } else {
      ATHANOR_LOG(DEBUG) << "s3 " << result.status().ToString() << ", retrying";
    }
  }
  ReleaseHandle(handle);
  if (result.ok() && RetryableHttp(*result)) {
    return absl::UnavailableError(absl::StrCat("s3 ", request.method, " ", request.key, ": HTTP ",
                                               result->status, " ", xml::FindText(result->body, "Code"),
                                               " after ", options_.max_attempts, " attempts"));
  }
  if (!result.ok()) {
    return absl::Status(result.status().code(), absl::StrCat(result.status().message(), " (after ",
                                                             options_.max_attempts, " attempts)"));
  }
  return result;
}

absl::Status S3ErrorStatus(const S3Response& r, const std::string& what) {
  std::string code = xml::FindText(r.body, "Code");
  std::string message = absl::StrCat(what, ": HTTP ", r.status, code.empty() ? "" : " ", code,
                                     r.body.empty() ? "" : ": ", xml::FindText(r.body, "Message"));
  switch (r.status) {
    case 404: return absl::NotFoundError(message);
    case 412: return absl::AlreadyExistsError(message);
    case 401:
    case 403: return absl::PermissionDeniedError(message);
    case 416: return absl::OutOfRangeError(message);
    case 501: return absl::UnimplementedError(message);
    case 503: return absl::UnavailableError(message);
    default: return absl::InternalError(message);
  }
}

}  // namespace athanor

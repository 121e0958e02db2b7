// ChildProcess's pipes (child_process.hpp): stdout read and split into lines as it arrives
// (a line longer than max_line cut), stderr buffered up to max_output for take_stderr, and
// stdin written as the pipe takes it. Starting the process and its exit and kill are in
// child_process.cpp.
#include "proc/child_process.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kagent {

void ChildProcess::on_readable(int fd, std::string& buf, size_t& dropped, bool& eof) {
  auto self = shared_from_this();  // callbacks below may drop the last outside reference
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
      if (fd == out_fd_) {
        append_stdout(chunk, static_cast<size_t>(n));
        continue;
      }
      size_t room = buf.size() < max_output_ ? max_output_ - buf.size() : 0;
      size_t keep = std::min(room, static_cast<size_t>(n));
      buf.append(chunk, keep);
      dropped += static_cast<size_t>(n) - keep;
      continue;
    }
    if (n == 0) {
      eof = true;
      if (fd == out_fd_) close_fd(out_fd_); else close_fd(err_fd_);
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    eof = true;
    if (fd == out_fd_) close_fd(out_fd_); else close_fd(err_fd_);
    break;
  }
  deliver_line_if_ready();
  finish_if_done();
}

void ChildProcess::append_stdout(const char* p, size_t n) {
  while (n > 0) {
    if (out_skipping_) {  // the rest of a cut line: dropped up to and with its newline
      const void* nl = std::memchr(p, '\n', n);
      size_t upto = nl ? static_cast<size_t>(static_cast<const char*>(nl) - p) + 1 : n;
      out_dropped_ += nl ? upto - 1 : upto;
      out_skipping_ = nl == nullptr;
      p += upto;
      n -= upto;
      continue;
    }
    const void* nl = std::memchr(p, '\n', n);
    const size_t body = nl ? static_cast<size_t>(static_cast<const char*>(nl) - p) : n;
    const size_t pending = out_buf_.size() - out_consumed_;
    const size_t room = pending < max_output_ ? max_output_ - pending : 0;
    const size_t partial = out_buf_.size() - line_start_;
    if (line_mode_ && partial + body > max_line_) {  // past max_line: its head goes out now
      const size_t keep = std::min(max_line_ - partial, room);
      out_buf_.append(p, keep);
      out_dropped_ += max_line_ - partial - keep;  // the reader is behind: part of the head too
      out_buf_.push_back('\n');
      cuts_.push_back(out_base_ + out_buf_.size() - 1);
      line_start_ = out_buf_.size();
      out_skipping_ = true;
      p += max_line_ - partial;
      n -= max_line_ - partial;
      continue;
    }
    const size_t want = nl ? body + 1 : body;
    const size_t take = std::min(want, room);
    out_buf_.append(p, take);
    out_dropped_ += want - take;  // the reader is behind by max_output: dropped and counted
    if (nl && take == want) line_start_ = out_buf_.size();
    p += want;
    n -= want;
  }
}

void ChildProcess::cut_long_partial() {
  if (out_buf_.size() - line_start_ <= max_line_) return;
  out_dropped_ += out_buf_.size() - line_start_ - max_line_;
  out_buf_.resize(line_start_ + max_line_);
  out_buf_.push_back('\n');
  cuts_.push_back(out_base_ + out_buf_.size() - 1);
  line_start_ = out_buf_.size();
  out_skipping_ = !out_eof_;
}

bool ChildProcess::try_read_line(std::string& line, bool& eof, bool* cut) {
  eof = false;
  if (cut) *cut = false;
  if (!line_mode_) {  // the first read by lines: from now on a line is held to max_line
    line_mode_ = true;
    cut_long_partial();
  }
  // a newline is only known to be there before line_start_: nothing past it is scanned again
  size_t nl = out_consumed_ < line_start_ ? out_buf_.find('\n', out_consumed_) : std::string::npos;
  if (nl != std::string::npos) {
    line.assign(out_buf_, out_consumed_, nl - out_consumed_);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out_consumed_ = nl + 1;
    if (!cuts_.empty() && cuts_.front() == out_base_ + nl) {
      cuts_.erase(cuts_.begin());
      if (cut) *cut = true;
    }
    // Compact once the consumed prefix is large, so a long-lived worker's buffer stays small.
    if (out_consumed_ > (1u << 20)) {
      out_buf_.erase(0, out_consumed_);
      line_start_ -= out_consumed_;
      out_base_ += out_consumed_;
      out_consumed_ = 0;
    }
    return true;
  }
  if (out_eof_) {
    if (out_consumed_ < out_buf_.size()) {
      line.assign(out_buf_, out_consumed_, std::string::npos);
      out_consumed_ = out_buf_.size();
      return true;
    }
    eof = true;
  }
  return false;
}

size_t ChildProcess::take_stderr(std::string& out) {
  out.swap(err_buf_);
  err_buf_.clear();
  const size_t dropped = err_dropped_;
  err_dropped_ = 0;
  return dropped;
}

ChildProcess::LineCallback ChildProcess::take_line_cb() {
  auto cb = std::move(line_cb_);
  line_cb_ = nullptr;
  if (line_timer_) loop_.cancel_timer(line_timer_), line_timer_ = 0;
  return cb;
}

void ChildProcess::deliver_line_if_ready() {
  if (!line_cb_) return;
  std::string line;
  bool eof = false;
  bool cut = false;
  if (try_read_line(line, eof, &cut)) {
    take_line_cb()(std::move(line), cut ? "CUT" : nullptr);
  } else if (eof) {
    take_line_cb()(std::nullopt, "EOF");
  }
}

void ChildProcess::on_line(double timeout, LineCallback cb) {
  line_cb_ = std::move(cb);
  if (timeout >= 0) {
    std::weak_ptr<ChildProcess> weak = shared_from_this();
    line_timer_ = loop_.add_timer(timeout, [weak] {
      auto s = weak.lock();
      if (!s || !s->line_cb_) return;
      s->line_timer_ = 0;
      auto cb = std::move(s->line_cb_);
      s->line_cb_ = nullptr;
      cb(std::nullopt, "ETIMEDOUT");
    });
  }
  deliver_line_if_ready();
}

void ChildProcess::cancel_line_wait() { take_line_cb(); }

void ChildProcess::write(std::string data, WriteCallback cb) {
  if (in_fd_ < 0) {
    cb("stdin is closed");
    return;
  }
  in_pending_ += data;
  write_cb_ = std::move(cb);
  std::weak_ptr<ChildProcess> weak = shared_from_this();
  loop_.watch_fd(in_fd_, EPOLLOUT, [weak](uint32_t) {
    if (auto s = weak.lock()) s->on_writable();
  });
}

void ChildProcess::on_writable() {
  while (!in_pending_.empty()) {
    ssize_t n = ::write(in_fd_, in_pending_.data(), in_pending_.size());
    if (n > 0) {
      in_pending_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // wait for EPOLLOUT again
    // EPIPE: the child closed its stdin or died.
    std::string msg = std::string("write to stdin failed: ") + std::strerror(errno);
    in_pending_.clear();
    loop_.unwatch_fd(in_fd_);
    if (auto cb = std::move(write_cb_)) {
      write_cb_ = nullptr;
      cb(msg.c_str());
    }
    return;
  }
  loop_.unwatch_fd(in_fd_);
  if (auto cb = std::move(write_cb_)) {
    write_cb_ = nullptr;
    cb(nullptr);
  }
}

void ChildProcess::close_stdin() {
  close_fd(in_fd_);
  in_pending_.clear();
}

}  // namespace kagent

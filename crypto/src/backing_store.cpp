// Backing stores: a file or block device through pread/pwrite, and memory.
#include <blkcrypt/backing_store.hpp>

#include <blkcrypt/internal/mapped_file.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace blkcrypt {
namespace {

// True when [offset, offset+len) lies within size, without overflowing.
bool fits(uint64_t offset, std::size_t len, uint64_t size) noexcept {
    return offset <= size && len <= size - offset;
}

class FileStore final : public BackingStore {
public:
    FileStore(int fd, uint64_t size, bool writable, bool regular, std::string path)
        : fd_(fd), size_(size), writable_(writable), regular_(regular), path_(std::move(path)) {}
    ~FileStore() override {
        map_.reset();
        if (direct_fd_ >= 0) ::close(direct_fd_);
        ::close(fd_);
    }
    FileStore(const FileStore&) = delete;
    FileStore& operator=(const FileStore&) = delete;

    // pread/pwrite may transfer less than asked (signals, device limits):
    // loop until done; a zero-byte read means the file shrank under us.
    Status read(uint64_t offset, Bytes out) override {
        if (!fits(offset, out.size(), size_)) return Status::IoError;
        std::size_t done = 0;
        while (done < out.size()) {
            ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                                static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return Status::IoError;
            done += static_cast<std::size_t>(n);
        }
        return Status::Ok;
    }

    Status write(uint64_t offset, ConstBytes in) override {
        if (!writable_ || !fits(offset, in.size(), size_)) return Status::IoError;
        std::size_t done = 0;
        while (done < in.size()) {
            ssize_t n = ::pwrite(fd_, in.data() + done, in.size() - done,
                                 static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return Status::IoError;
            done += static_cast<std::size_t>(n);
        }
        return Status::Ok;
    }

    uint64_t size() const override { return size_; }

    void hint_sequential() noexcept override {
        (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    }

    ConstBytes mapped() override {
        // nullptr (e.g. a device that cannot be mapped): callers pread.
        std::call_once(map_once_, [this] { map_ = MappedFile::map(fd_, size_); });
        return map_ ? map_->bytes() : ConstBytes{};
    }

    void release_mapped(uint64_t offset, uint64_t len) noexcept override {
        if (map_) map_->release(offset, len);
    }

    int direct_fd() noexcept override {
        std::call_once(direct_once_, [this] { direct_fd_ = open_direct(); });
        return direct_fd_;
    }

    bool changed() noexcept override {
        if (map_ && map_->truncated()) return true;
        struct stat st {};
        // A block device keeps its size; st_size is 0 for it anyway.
        return regular_ && ::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) != size_;
    }

    std::string name() const override { return path_; }

    void start_writeback(uint64_t offset, uint64_t len) noexcept override {
        if (writable_)  // advice: an error here resurfaces at flush()
            (void)::sync_file_range(fd_, static_cast<off64_t>(offset), static_cast<off64_t>(len),
                                    SYNC_FILE_RANGE_WRITE);
    }

    Status discard(uint64_t offset, uint64_t len) override {
        if (!writable_ || !regular_) return Status::Unsupported;
        if (offset > size_ || len > size_ - offset) return Status::IoError;
        if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                        static_cast<off_t>(len)) != 0)
            return errno == EOPNOTSUPP ? Status::Unsupported : Status::IoError;
        return Status::Ok;
    }

    // SEEK_DATA/SEEK_HOLE; a file system without them (EINVAL) reports all
    // of the file as data, which is what the calls do there anyway.
    Run allocation(uint64_t offset, uint64_t len) noexcept override {
        const Run data{len, false};
        if (!regular_ || offset >= size_) return data;
        len = std::min(len, size_ - offset);
        const off_t d = ::lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);
        if (d < 0) return errno == ENXIO ? Run{len, true} : Run{len, false};  // ENXIO: a hole to the end
        if (static_cast<uint64_t>(d) > offset) return {std::min(len, static_cast<uint64_t>(d) - offset), true};
        const off_t h = ::lseek(fd_, static_cast<off_t>(offset), SEEK_HOLE);
        if (h <= d) return {len, false};
        return {std::min(len, static_cast<uint64_t>(h) - offset), false};
    }

    Status flush() override {
        if (!writable_) return Status::Ok;
        while (::fdatasync(fd_) != 0)
            if (errno != EINTR) return Status::IoError;
        return Status::Ok;
    }

private:
    // Reopened through /proc (the path may have been renamed or replaced
    // since), and checked to be the same inode.
    int open_direct() const noexcept {
        const std::string self = "/proc/self/fd/" + std::to_string(fd_);
        const int fd = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd < 0) return -1;
        struct stat a {}, b {};
        if (::fstat(fd_, &a) == 0 && ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
            a.st_rdev == b.st_rdev)
            return fd;
        ::close(fd);
        return -1;
    }

    int fd_;
    uint64_t size_;
    bool writable_;
    bool regular_;
    std::string path_;
    std::once_flag map_once_;
    std::unique_ptr<MappedFile> map_;
    std::once_flag direct_once_;
    int direct_fd_ = -1;
};

Error sys_error(const std::string& what, const std::string& path, int err) {
    return make_error(Status::IoError, what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

Result<std::shared_ptr<BackingStore>> open_file_store(const std::string& path, bool writable) {
    // O_NONBLOCK so that a FIFO without a writer is refused below instead of
    // blocking the open; it is cleared before any I/O.
    int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return sys_error("cannot open", path, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        return sys_error("cannot stat", path, err);
    }
    uint64_t size = 0;
    if (S_ISBLK(st.st_mode)) {
        // st_size is 0 for a block device; the kernel knows its length.
        if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
            int err = errno;
            ::close(fd);
            return sys_error("cannot get the size of", path, err);
        }
    } else if (S_ISREG(st.st_mode)) {
        size = static_cast<uint64_t>(st.st_size);
    } else {
        ::close(fd);
        return make_error(Status::Invalid, "'" + path + "' is neither a regular file nor a block device");
    }
    if (const int fl = ::fcntl(fd, F_GETFL); fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        ::close(fd);
        return sys_error("cannot set blocking I/O on", path, err);
    }
    return std::shared_ptr<BackingStore>(std::make_shared<FileStore>(fd, size, writable, S_ISREG(st.st_mode), path));
}

std::shared_ptr<BackingStore> adopt_file_store(int fd, uint64_t size, std::string name) {
    return std::make_shared<FileStore>(fd, size, false, true, std::move(name));
}

Status MemoryStore::read(uint64_t offset, Bytes out) {
    if (!fits(offset, out.size(), data_.size())) return Status::IoError;
    if (!out.empty()) std::memcpy(out.data(), data_.data() + offset, out.size());
    return Status::Ok;
}

Status MemoryStore::write(uint64_t offset, ConstBytes in) {
    if (!fits(offset, in.size(), data_.size())) return Status::IoError;
    if (!in.empty()) std::memcpy(data_.data() + offset, in.data(), in.size());
    return Status::Ok;
}

}  // namespace blkcrypt

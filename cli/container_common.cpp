#include "container_common.hpp"

#include <cerrno>

#include <sys/stat.h>

namespace cli {

namespace {

const char* kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    return "not a regular file";
}

}  // namespace

std::shared_ptr<blkcrypt::BackingStore> open_container_image(const std::string& path, bool writable,
                                                             const std::string& role) {
    if (path == "-") throw UsageError(role + " cannot be stdin: its metadata is read first");
    auto s = blkcrypt::open_store(path, writable);
    if (s) return std::move(s).value();
    refuse_device(path, role, s.error().message);
}

void refuse_device(const std::string& path, const std::string& role, const std::string& error) {
    // An NBD URI's error names the server's answer already.
    if (blkcrypt::is_nbd_uri(path)) throw Failure(error);
    // Why it failed, from the path itself (the store's error says only the errno).
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == EACCES || errno == ENOTDIR)
            throw StatusFailure("Device " + path + " does not exist or access denied.", kExitNoDevice);
    } else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        throw StatusFailure("Device " + path + " is not compatible (" + kind_of(st.st_mode) + "; " + role +
                                " must be a regular file or a block device).",
                            kExitNoDevice);
    }
    throw Failure(error);
}

}  // namespace cli

// See <blkcrypt/random.hpp>.
#include <blkcrypt/random.hpp>

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace blkcrypt {

Result<void> random_bytes(Bytes out) {
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t got = ::getrandom(out.data() + done, out.size() - done, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return make_error(Status::IoError, std::string("getrandom: ") + std::strerror(errno));
        }
        done += static_cast<std::size_t>(got);
    }
    return {};
}

}  // namespace blkcrypt

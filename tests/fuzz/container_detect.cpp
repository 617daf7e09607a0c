// containers::detect: the input is an image's first bytes (up to 5 MiB, so
// the LUKS2 secondary offsets are in reach). Detection must answer or refuse
// without reading past the image, and what it names must carry its magic.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/containers/container.hpp>

#include <cstdlib>
#include <cstring>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > (5u << 20)) return 0;
    MemoryStore image(size);
    if (size) std::memcpy(image.data().data(), data, size);
    auto f = containers::detect(image);
    if (!f) {
        if (f.status() != Status::NotFound) std::abort();
        return 0;
    }
    const auto name = containers::format_name(*f);
    if (name.empty() || name == "?") std::abort();
    if ((*f == containers::Format::Luks1 || *f == containers::Format::Bitlk || *f == containers::Format::Fvault2 ||
         *f == containers::Format::Integrity) &&
        size < 512)
        std::abort();
    if (*f == containers::Format::Integrity && (std::memcmp(data, "integrt", 8) != 0 || data[8] < 1 || data[8] > 5))
        std::abort();
    return 0;
}

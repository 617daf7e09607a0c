// Layering the build relies on: BackingStore has a home of its own, and the
// verity engines do not include the dm-crypt headers for it.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/backing_store.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>

static_assert(std::is_same_v<blkcrypt::BackingStore, blkcrypt::dm::BackingStore>,
              "dm::BackingStore stays the same type for old callers");

TEST_CASE("verity sources include no dm-crypt header", "[layering]") {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(BLKCRYPT_SOURCE_DIR) / "verity";
    REQUIRE(fs::is_directory(root));
    std::size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (!e.is_regular_file()) continue;
        const auto ext = e.path().extension();
        if (ext != ".cpp" && ext != ".hpp") continue;
        ++files;
        std::ifstream in(e.path());
        std::stringstream ss;
        ss << in.rdbuf();
        INFO(e.path().string());
        CHECK(ss.str().find("#include <blkcrypt/dm/") == std::string::npos);
    }
    CHECK(files > 5);
}

TEST_CASE("MemoryStore through the neutral header", "[layering]") {
    blkcrypt::MemoryStore m(16);
    const uint8_t in[4] = {1, 2, 3, 4};
    REQUIRE(m.write(4, in) == blkcrypt::Status::Ok);
    uint8_t out[4] = {};
    REQUIRE(m.read(4, out) == blkcrypt::Status::Ok);
    CHECK(out[3] == 4);
    CHECK(m.write(14, in) == blkcrypt::Status::IoError);
}

// bitlk and fvault2 are layers over the core and the dm-crypt engine only:
// their key dump lines, base64, GUID text and byte order come from the core
// (key_dump.hpp, base64.hpp, guid.hpp, bytes_util.hpp), not from luks/.
TEST_CASE("bitlk and fvault2 sources include no LUKS header", "[layering]") {
    namespace fs = std::filesystem;
    std::size_t files = 0;
    for (const char* dir : {"bitlk", "fvault2"}) {
        const fs::path root = fs::path(BLKCRYPT_SOURCE_DIR) / dir;
        REQUIRE(fs::is_directory(root));
        for (const auto& e : fs::recursive_directory_iterator(root)) {
            if (!e.is_regular_file()) continue;
            const auto ext = e.path().extension();
            if (ext != ".cpp" && ext != ".hpp" && e.path().filename() != "CMakeLists.txt") continue;
            ++files;
            std::ifstream in(e.path());
            std::stringstream ss;
            ss << in.rdbuf();
            INFO(e.path().string());
            CHECK(ss.str().find("blkcrypt/luks/") == std::string::npos);
            CHECK(ss.str().find("luks/include") == std::string::npos);
            CHECK(ss.str().find("luks::") == std::string::npos);
        }
    }
    CHECK(files >= 6);
}

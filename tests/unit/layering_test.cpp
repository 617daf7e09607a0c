// Layering the build relies on: BackingStore has a home of its own, and the
// verity engines do not include the dm-crypt headers for it.
#include "paths.hpp"
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/backing_store.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

TEST_CASE("verity sources include no dm-crypt header", "[layering]") {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(testutil::kSourceDir) / "verity";
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

// Folder -> the header folders (<blkcrypt/NAME/...>) its sources may
// include; "" is the core's top level, "internal" the core's internals. The
// dm layer sits on verity (a table may hold verity lines) and on integrity's
// TaggedDevice (dm-crypt's integrity feature stacks on it), the formats on dm
// (they unlock to a dm table), the NBD server on dm's BlockDevice alone.
TEST_CASE("each layer includes only the layers below it", "[layering]") {
    namespace fs = std::filesystem;
    const std::set<std::string> core{"", "internal"};
    auto with = [&](std::initializer_list<const char*> more) {
        std::set<std::string> s = core;
        for (const char* m : more) s.insert(m);
        return s;
    };
    const std::map<std::string, std::set<std::string>> allowed{
        {"crypto", core},
        {"templates", core},
        {"verity", with({"verity"})},
        {"integrity", with({"integrity"})},
        {"dmcrypt", with({"dm", "verity", "integrity"})},  // integrity: table lines, tagged devices
        {"luks", with({"luks", "dm", "verity", "integrity"})},  // integrity: LUKS2 --integrity stacks on it
        {"tcrypt", with({"tcrypt", "dm", "verity"})},
        {"bitlk", with({"bitlk", "dm", "verity", "luks"})},      // luks: key dump lines
        {"fvault2", with({"fvault2", "dm", "verity", "luks"})},  // luks: base64
        {"loopaes", with({"loopaes", "dm", "verity"})},
        {"nbd", with({"nbd", "dm"})},
        {"containers", with({"containers", "dm", "verity", "integrity", "luks", "bitlk", "fvault2"})},
    };
    const std::regex inc(R"(#include <blkcrypt/(([a-z0-9_]+)/)?[^>]*>)");
    for (const auto& [folder, ok] : allowed) {
        const fs::path root = fs::path(testutil::kSourceDir) / folder;
        REQUIRE(fs::is_directory(root));
        for (const auto& e : fs::recursive_directory_iterator(root)) {
            if (!e.is_regular_file()) continue;
            const auto ext = e.path().extension();
            if (ext != ".cpp" && ext != ".hpp") continue;
            std::ifstream in(e.path());
            std::string line;
            while (std::getline(in, line)) {
                std::smatch m;
                if (!std::regex_search(line, m, inc)) continue;
                INFO(e.path().string() << ": " << line);
                CHECK(ok.count(m[2].str()) == 1);
            }
        }
    }
}

TEST_CASE("the NBD server names no target and no format", "[layering]") {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(testutil::kSourceDir) / "nbd";
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (!e.is_regular_file()) continue;
        std::ifstream in(e.path());
        std::stringstream ss;
        ss << in.rdbuf();
        INFO(e.path().string());
        for (const char* word : {"CryptTarget", "VerityTarget", "dm_table", "make_crypt_device", "luks", "tcrypt"})
            CHECK(ss.str().find(word) == std::string::npos);
    }
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
        const fs::path root = fs::path(testutil::kSourceDir) / dir;
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

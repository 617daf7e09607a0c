#include <blkcrypt/verity/superblock.hpp>

#include <blkcrypt/internal/bytes_util.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace blkcrypt::verity {

namespace {

constexpr char kMagic[8] = {'v', 'e', 'r', 'i', 't', 'y', 0, 0};
constexpr std::size_t kOffVersion = 8, kOffHashType = 12, kOffUuid = 16, kOffAlg = 32,
                      kOffDataBs = 64, kOffHashBs = 68, kOffBlocks = 72, kOffSaltSize = 80,
                      kOffSalt = 88, kAlgLen = 32, kSaltMax = 256;

Error corrupt(std::string msg) { return make_error(Status::Corrupt, "superblock: " + std::move(msg)); }

}  // namespace

Result<std::array<uint8_t, kSuperblockSize>> encode_superblock(const VerityParams& p) {
    if (auto ok = check_params(p); !ok) return ok.error();
    if (p.hash_name.size() >= kAlgLen)
        return make_error(Status::Invalid, "hash name '" + p.hash_name +
                                               "' is too long for the superblock (31 bytes)");
    std::array<uint8_t, kSuperblockSize> sb{};
    std::memcpy(sb.data(), kMagic, sizeof kMagic);
    put_le32(sb.data() + kOffVersion, 1);
    put_le32(sb.data() + kOffHashType, p.hash_type);
    std::copy(p.uuid.begin(), p.uuid.end(), sb.begin() + kOffUuid);
    // veritysetup lower-cases the name it stores.
    std::transform(p.hash_name.begin(), p.hash_name.end(), sb.begin() + kOffAlg,
                   [](char c) { return static_cast<uint8_t>(std::tolower(static_cast<unsigned char>(c))); });
    put_le32(sb.data() + kOffDataBs, p.data_block_size);
    put_le32(sb.data() + kOffHashBs, p.hash_block_size);
    put_le64(sb.data() + kOffBlocks, p.data_blocks);
    put_le16(sb.data() + kOffSaltSize, static_cast<uint16_t>(p.salt.size()));
    std::copy(p.salt.begin(), p.salt.end(), sb.begin() + kOffSalt);
    return sb;
}

Result<VerityParams> decode_superblock(ConstBytes sb) {
    if (sb.size() < kSuperblockSize) return corrupt("shorter than 512 bytes");
    if (std::memcmp(sb.data(), kMagic, sizeof kMagic) != 0)
        return corrupt("bad magic (not a verity hash device, or wrong --hash-offset)");
    if (const uint32_t v = get_le32(sb.data() + kOffVersion); v != 1)
        return corrupt("unsupported version " + std::to_string(v));
    VerityParams p;
    p.hash_type = get_le32(sb.data() + kOffHashType);
    if (p.hash_type > 1) return corrupt("unsupported hash type " + std::to_string(p.hash_type));
    std::copy_n(sb.begin() + kOffUuid, p.uuid.size(), p.uuid.begin());
    const auto* alg = reinterpret_cast<const char*>(sb.data() + kOffAlg);
    const std::size_t alg_len = strnlen(alg, kAlgLen);
    if (alg_len == kAlgLen) return corrupt("hash algorithm name is not terminated");
    if (alg_len == 0) return corrupt("empty hash algorithm name");
    p.hash_name.assign(alg, alg_len);
    p.data_block_size = get_le32(sb.data() + kOffDataBs);
    p.hash_block_size = get_le32(sb.data() + kOffHashBs);
    p.data_blocks = get_le64(sb.data() + kOffBlocks);
    const uint16_t salt_size = get_le16(sb.data() + kOffSaltSize);
    if (salt_size > kSaltMax) return corrupt("salt size " + std::to_string(salt_size) + " > 256");
    p.salt.assign(sb.begin() + kOffSalt, sb.begin() + kOffSalt + salt_size);
    if (auto ok = check_params(p); !ok) return corrupt(ok.error().message);
    return p;
}

}  // namespace blkcrypt::verity

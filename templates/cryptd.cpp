#include <blkcrypt/internal/template.hpp>
namespace blkcrypt {
std::shared_ptr<Template> make_cryptd_template() { return nullptr; }
}

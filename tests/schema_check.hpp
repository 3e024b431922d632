#pragma once
// Validating foldcheck's JSON against reports/schema/foldcheck.schema.json (valijson,
// Debian libvalijson-dev). schema_errors() returns one line per violation (empty: valid).
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

namespace foldcheck_cli_test {

inline const valijson::Schema& foldcheck_schema() {
  static const valijson::Schema* schema = [] {
    std::ifstream in(std::string(FOLDCHECK_SOURCE_DIR) + "/reports/schema/foldcheck.schema.json");
    static const nlohmann::json doc = nlohmann::json::parse(in);
    auto* s = new valijson::Schema;
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter a(doc);
    parser.populateSchema(a, *s);
    return s;
  }();
  return *schema;
}

inline std::vector<std::string> schema_errors(const nlohmann::json& doc) {
  valijson::Validator v;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter a(doc);
  std::vector<std::string> errors;
  if (v.validate(foldcheck_schema(), a, &results)) return errors;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) {
    std::string where;
    for (const std::string& c : e.context) where += c;
    errors.push_back(where + ": " + e.description);
  }
  return errors;
}

}  // namespace foldcheck_cli_test

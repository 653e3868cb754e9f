//! A sqlparser dialect that parses the plainest expression prefixes — a column name, a number,
//! a quoted string, a plain function call — straight away, and is otherwise exactly the dialect
//! it wraps.
//!
//! Why: before every expression prefix, sqlparser first tries to read a data type
//! (`DATE '2020-05-20'`, `INTERVAL '7' DAY`): it parses one, fails, formats an error message
//! for it and rewinds. On a column name or a literal that guess can never succeed, and it was
//! ~12,000 instructions of a line-rate event (the whole parse is ~56,000). [`plain_prefix`]
//! returns what sqlparser returns for such a prefix after its guess has failed, for exactly the
//! token sequences where the guess cannot succeed; before a call (`count(x)`, read as a custom
//! type with modifiers, then refused) it calls sqlparser's own `parse_function`, as sqlparser
//! does next, for calls whose tokens make its success certain ([`plain_call_follows`]);
//! everything else (other keywords, other calls, typed strings, lambdas, introducers) goes
//! sqlparser's own way.
//!
//! What it promises: the same statements as the wrapped dialect for every SQL text. Every
//! other method of [`sqlparser::dialect::Dialect`] is forwarded to the wrapped dialect (its
//! `dialect()` identity included, so sqlparser's `dialect_of!` checks see the dialect it wraps);
//! the unit tests parse every SQL text of `shared/data` and sqlparser-shaped edge cases with
//! every dialect both ways and compare the statements. One difference, at the parser's
//! recursion limit only: sqlparser's data-type guess takes one level of the nesting budget, so a
//! prefix at exactly the limit that sqlparser refuses (`RecursionLimitExceeded`) parses here.
//!
//! The forwarding list is sqlparser 0.63's `Dialect` trait, method for method; a method a later
//! sqlparser adds would take its default here until added, which the comparison tests catch for
//! any dialect that overrides it on the SQL they parse.

use core::any::TypeId;
use core::iter::Peekable;
use core::str::Chars;

use sqlparser::ast::{
    ColumnOption, Expr, GranteesType, Ident, ObjectName, ObjectNamePart, Statement,
};
use sqlparser::dialect::{Dialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// `inner`, with [`plain_prefix`] tried before sqlparser's own prefix parsing.
#[derive(Debug)]
pub(super) struct PlainPrefixes {
    inner: &'static dyn Dialect,
}

impl PlainPrefixes {
    pub(super) fn new(inner: &'static dyn Dialect) -> Self {
        PlainPrefixes { inner }
    }
}

/// The prefix at the parser's position when it is a column name or a number or a single-quoted
/// string whose data-type guess cannot succeed, parsed as sqlparser parses it after the guess
/// fails; `None` for everything else.
///
/// sqlparser's `parse_prefix_inner` reads a data type first and keeps it only when it is not a
/// custom (non-keyword) type name — a bare `xml` is one, but `xml` is a keyword — or when a
/// `[]` / `ARRAY` suffix makes it an array type; then, for a word that is no keyword,
/// `Expr::Identifier` unless a `(` (function call), a string (an introducer like `_utf8'…'`)
/// or an `->` (lambda) follows; for a number or a single-quoted string,
/// `Expr::Value(parse_value())`. Neither can fail, which is why only these are taken: sqlparser
/// remembers where a prefix failed (its guard against re-parsing the same failure over and
/// over), and a prefix parsed here never passes through that memo.
fn plain_prefix(parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
    let token = parser.peek_token_ref();
    match &token.token {
        // No data type starts with a literal: the guess fails at once.
        Token::Number(..) | Token::SingleQuotedString(_) => {
            Some(parser.parse_value().map(Expr::Value))
        }
        Token::Word(word) if word.keyword == Keyword::NoKeyword && plain_word_follows(parser) => {
            let ident = word.to_ident(token.span);
            parser.advance_token();
            Some(Ok(Expr::Identifier(ident)))
        }
        // A plain call: sqlparser's own `parse_function`, as its identifier path calls it once
        // the data-type guess (`count(x)` read as a custom type with modifiers) has failed.
        Token::Word(word) if plain_call_follows(parser, word.keyword) => {
            let name = ObjectName::from(vec![word.to_ident(token.span)]);
            parser.advance_token();
            Some(parser.parse_function(name))
        }
        _ => None,
    }
}

/// Whether the tokens at the parser's position are a call that sqlparser parses with
/// `parse_function` after its data-type guess fails, and that cannot fail: a name that is no
/// keyword, or one of the aggregates that is (`COUNT`, `SUM`, `AVG`, `MIN`, `MAX`: neither
/// data types nor words with an expression of their own), then `(`, then `*` or an optional
/// `DISTINCT` and plain arguments (`a`, `t.a`, a number, a single-quoted string) separated by
/// commas, then `)`; and after it nothing that `parse_function` reads on (`(` — ClickHouse's
/// parameters —, `OVER`, `FILTER`, `WITHIN`, `RESPECT`, `IGNORE`) or that turns the guess's
/// custom type into an array type that may succeed (`[`, `ARRAY`). A call outside this shape
/// goes sqlparser's way, so that a failure is remembered by sqlparser's memo as before (a
/// prefix parsed here never passes through it).
fn plain_call_follows(parser: &Parser, keyword: Keyword) -> bool {
    if !matches!(
        keyword,
        Keyword::NoKeyword
            | Keyword::COUNT
            | Keyword::SUM
            | Keyword::AVG
            | Keyword::MIN
            | Keyword::MAX
    ) || parser.peek_nth_token_ref(1).token != Token::LParen
    {
        return false;
    }
    let plain_name = |n: usize| matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == Keyword::NoKeyword);
    let mut n = 2;
    if parser.peek_nth_token_ref(n).token == Token::Mul {
        n += 1;
    } else {
        if matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == Keyword::DISTINCT)
        {
            n += 1;
        }
        loop {
            match &parser.peek_nth_token_ref(n).token {
                Token::Number(..) | Token::SingleQuotedString(_) => n += 1,
                Token::Word(_) if plain_name(n) => {
                    n += 1;
                    while parser.peek_nth_token_ref(n).token == Token::Period {
                        if !plain_name(n + 1) {
                            return false;
                        }
                        n += 2;
                    }
                }
                _ => return false,
            }
            if parser.peek_nth_token_ref(n).token != Token::Comma {
                break;
            }
            n += 1;
        }
    }
    if parser.peek_nth_token_ref(n).token != Token::RParen {
        return false;
    }
    match &parser.peek_nth_token_ref(n + 1).token {
        Token::LParen | Token::LBracket => false,
        Token::Word(w) => !matches!(
            w.keyword,
            Keyword::OVER
                | Keyword::FILTER
                | Keyword::WITHIN
                | Keyword::RESPECT
                | Keyword::IGNORE
                | Keyword::ARRAY
        ),
        _ => true,
    }
}

/// Whether the tokens after a non-keyword word make it a plain identifier on both of
/// sqlparser's paths. The identifier path makes something else of it before a string (an
/// introducer, `_utf8'…'`) or a lambda's `->`; the data-type guess reads `word(.word)*` as a
/// custom type name and succeeds only when a `[` or `ARRAY` follows it (an array type), and
/// before a `(` either path may (type modifiers, a function call).
fn plain_word_follows(parser: &Parser) -> bool {
    match &parser.peek_nth_token_ref(1).token {
        Token::Arrow
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::HexStringLiteral(_) => return false,
        Token::Word(_) if parser.peek_nth_token_ref(2).token == Token::Arrow => return false,
        _ => {}
    }
    let mut n = 1;
    while parser.peek_nth_token_ref(n).token == Token::Period
        && matches!(parser.peek_nth_token_ref(n + 1).token, Token::Word(_))
    {
        n += 2;
    }
    match &parser.peek_nth_token_ref(n).token {
        Token::LParen | Token::LBracket => false,
        Token::Word(w) => w.keyword != Keyword::ARRAY,
        _ => true,
    }
}

impl Dialect for PlainPrefixes {
    fn dialect(&self) -> TypeId {
        self.inner.dialect()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.inner.is_delimited_identifier_start(ch)
    }

    fn is_nested_delimited_identifier_start(&self, ch: char) -> bool {
        self.inner.is_nested_delimited_identifier_start(ch)
    }

    fn peek_nested_delimited_identifier_quotes(
        &self,
        chars: Peekable<Chars<'_>>,
    ) -> Option<(char, Option<char>)> {
        self.inner.peek_nested_delimited_identifier_quotes(chars)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.inner.identifier_quote_style(identifier)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.inner.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.inner.is_identifier_part(ch)
    }

    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.inner.is_custom_operator_part(ch)
    }

    fn supports_string_literal_backslash_escape(&self) -> bool {
        self.inner.supports_string_literal_backslash_escape()
    }

    fn ignores_wildcard_escapes(&self) -> bool {
        self.inner.ignores_wildcard_escapes()
    }

    fn supports_unicode_string_literal(&self) -> bool {
        self.inner.supports_unicode_string_literal()
    }

    fn supports_filter_during_aggregation(&self) -> bool {
        self.inner.supports_filter_during_aggregation()
    }

    fn supports_window_clause_named_window_reference(&self) -> bool {
        self.inner.supports_window_clause_named_window_reference()
    }

    fn supports_within_after_array_aggregation(&self) -> bool {
        self.inner.supports_within_after_array_aggregation()
    }

    fn supports_partition_by_after_order_by(&self) -> bool {
        self.inner.supports_partition_by_after_order_by()
    }

    fn supports_array_join_syntax(&self) -> bool {
        self.inner.supports_array_join_syntax()
    }

    fn supports_alter_user_as_alter_role(&self) -> bool {
        self.inner.supports_alter_user_as_alter_role()
    }

    fn supports_group_by_expr(&self) -> bool {
        self.inner.supports_group_by_expr()
    }

    fn supports_group_by_with_modifier(&self) -> bool {
        self.inner.supports_group_by_with_modifier()
    }

    fn supports_left_associative_joins_without_parens(&self) -> bool {
        self.inner.supports_left_associative_joins_without_parens()
    }

    fn supports_outer_join_operator(&self) -> bool {
        self.inner.supports_outer_join_operator()
    }

    fn supports_cross_join_constraint(&self) -> bool {
        self.inner.supports_cross_join_constraint()
    }

    fn supports_connect_by(&self) -> bool {
        self.inner.supports_connect_by()
    }

    fn supports_execute_immediate(&self) -> bool {
        self.inner.supports_execute_immediate()
    }

    fn supports_match_recognize(&self) -> bool {
        self.inner.supports_match_recognize()
    }

    fn supports_in_empty_list(&self) -> bool {
        self.inner.supports_in_empty_list()
    }

    fn supports_in_unparenthesized_expr(&self) -> bool {
        self.inner.supports_in_unparenthesized_expr()
    }

    fn supports_start_transaction_modifier(&self) -> bool {
        self.inner.supports_start_transaction_modifier()
    }

    fn supports_end_transaction_modifier(&self) -> bool {
        self.inner.supports_end_transaction_modifier()
    }

    fn supports_named_fn_args_with_eq_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_eq_operator()
    }

    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_colon_operator()
    }

    fn supports_named_fn_args_with_assignment_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_assignment_operator()
    }

    fn supports_named_fn_args_with_rarrow_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_rarrow_operator()
    }

    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        self.inner.supports_named_fn_args_with_expr_name()
    }

    fn supports_numeric_prefix(&self) -> bool {
        self.inner.supports_numeric_prefix()
    }

    fn supports_numeric_literal_underscores(&self) -> bool {
        self.inner.supports_numeric_literal_underscores()
    }

    fn supports_window_function_null_treatment_arg(&self) -> bool {
        self.inner.supports_window_function_null_treatment_arg()
    }

    fn supports_dictionary_syntax(&self) -> bool {
        self.inner.supports_dictionary_syntax()
    }

    fn support_map_literal_syntax(&self) -> bool {
        self.inner.support_map_literal_syntax()
    }

    fn supports_lambda_functions(&self) -> bool {
        self.inner.supports_lambda_functions()
    }

    fn supports_parenthesized_set_variables(&self) -> bool {
        self.inner.supports_parenthesized_set_variables()
    }

    fn supports_comma_separated_set_assignments(&self) -> bool {
        self.inner.supports_comma_separated_set_assignments()
    }

    fn supports_update_order_by(&self) -> bool {
        self.inner.supports_update_order_by()
    }

    fn supports_select_wildcard_except(&self) -> bool {
        self.inner.supports_select_wildcard_except()
    }

    fn convert_type_before_value(&self) -> bool {
        self.inner.convert_type_before_value()
    }

    fn supports_triple_quoted_string(&self) -> bool {
        self.inner.supports_triple_quoted_string()
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        self.inner
            .parse_prefix(parser)
            .or_else(|| plain_prefix(parser))
    }

    fn supports_trailing_commas(&self) -> bool {
        self.inner.supports_trailing_commas()
    }

    fn supports_limit_comma(&self) -> bool {
        self.inner.supports_limit_comma()
    }

    fn supports_string_literal_concatenation(&self) -> bool {
        self.inner.supports_string_literal_concatenation()
    }

    fn supports_string_literal_concatenation_with_newline(&self) -> bool {
        self.inner
            .supports_string_literal_concatenation_with_newline()
    }

    fn supports_projection_trailing_commas(&self) -> bool {
        self.inner.supports_projection_trailing_commas()
    }

    fn supports_from_trailing_commas(&self) -> bool {
        self.inner.supports_from_trailing_commas()
    }

    fn supports_column_definition_trailing_commas(&self) -> bool {
        self.inner.supports_column_definition_trailing_commas()
    }

    fn supports_object_name_double_dot_notation(&self) -> bool {
        self.inner.supports_object_name_double_dot_notation()
    }

    fn supports_struct_literal(&self) -> bool {
        self.inner.supports_struct_literal()
    }

    fn supports_empty_projections(&self) -> bool {
        self.inner.supports_empty_projections()
    }

    fn supports_select_expr_star(&self) -> bool {
        self.inner.supports_select_expr_star()
    }

    fn supports_from_first_select(&self) -> bool {
        self.inner.supports_from_first_select()
    }

    fn supports_from_first_insert(&self) -> bool {
        self.inner.supports_from_first_insert()
    }

    fn supports_pipe_operator(&self) -> bool {
        self.inner.supports_pipe_operator()
    }

    fn supports_user_host_grantee(&self) -> bool {
        self.inner.supports_user_host_grantee()
    }

    fn supports_match_against(&self) -> bool {
        self.inner.supports_match_against()
    }

    fn supports_select_wildcard_exclude(&self) -> bool {
        self.inner.supports_select_wildcard_exclude()
    }

    fn supports_select_exclude(&self) -> bool {
        self.inner.supports_select_exclude()
    }

    fn supports_create_table_multi_schema_info_sources(&self) -> bool {
        self.inner.supports_create_table_multi_schema_info_sources()
    }

    fn supports_select_modifiers(&self) -> bool {
        self.inner.supports_select_modifiers()
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        self.inner.parse_infix(parser, expr, precedence)
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        self.inner.get_next_precedence(parser)
    }

    fn get_next_precedence_default(&self, parser: &Parser) -> Result<u8, ParserError> {
        self.inner.get_next_precedence_default(parser)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        self.inner.parse_statement(parser)
    }

    fn parse_column_option(
        &self,
        parser: &mut Parser,
    ) -> Result<Option<Result<Option<ColumnOption>, ParserError>>, ParserError> {
        self.inner.parse_column_option(parser)
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        self.inner.prec_value(prec)
    }

    fn prec_unknown(&self) -> u8 {
        self.inner.prec_unknown()
    }

    fn describe_requires_table_keyword(&self) -> bool {
        self.inner.describe_requires_table_keyword()
    }

    fn allow_extract_custom(&self) -> bool {
        self.inner.allow_extract_custom()
    }

    fn allow_extract_single_quotes(&self) -> bool {
        self.inner.allow_extract_single_quotes()
    }

    fn supports_extract_comma_syntax(&self) -> bool {
        self.inner.supports_extract_comma_syntax()
    }

    fn supports_subquery_as_function_arg(&self) -> bool {
        self.inner.supports_subquery_as_function_arg()
    }

    fn supports_create_view_comment_syntax(&self) -> bool {
        self.inner.supports_create_view_comment_syntax()
    }

    fn supports_array_typedef_without_element_type(&self) -> bool {
        self.inner.supports_array_typedef_without_element_type()
    }

    fn supports_parens_around_table_factor(&self) -> bool {
        self.inner.supports_parens_around_table_factor()
    }

    fn supports_values_as_table_factor(&self) -> bool {
        self.inner.supports_values_as_table_factor()
    }

    fn supports_dollar_placeholder(&self) -> bool {
        self.inner.supports_dollar_placeholder()
    }

    fn supports_dollar_as_money_prefix(&self) -> bool {
        self.inner.supports_dollar_as_money_prefix()
    }

    fn supports_create_index_with_clause(&self) -> bool {
        self.inner.supports_create_index_with_clause()
    }

    fn require_interval_qualifier(&self) -> bool {
        self.inner.require_interval_qualifier()
    }

    fn supports_explain_with_utility_options(&self) -> bool {
        self.inner.supports_explain_with_utility_options()
    }

    fn supports_asc_desc_in_column_definition(&self) -> bool {
        self.inner.supports_asc_desc_in_column_definition()
    }

    fn supports_factorial_operator(&self) -> bool {
        self.inner.supports_factorial_operator()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        self.inner.supports_bitwise_shift_operators()
    }

    fn supports_nested_comments(&self) -> bool {
        self.inner.supports_nested_comments()
    }

    fn supports_multiline_comment_hints(&self) -> bool {
        self.inner.supports_multiline_comment_hints()
    }

    fn supports_eq_alias_assignment(&self) -> bool {
        self.inner.supports_eq_alias_assignment()
    }

    fn supports_try_convert(&self) -> bool {
        self.inner.supports_try_convert()
    }

    fn supports_bang_not_operator(&self) -> bool {
        self.inner.supports_bang_not_operator()
    }

    fn supports_listen_notify(&self) -> bool {
        self.inner.supports_listen_notify()
    }

    fn supports_exclude_constraint(&self) -> bool {
        self.inner.supports_exclude_constraint()
    }

    fn supports_load_data(&self) -> bool {
        self.inner.supports_load_data()
    }

    fn supports_load_extension(&self) -> bool {
        self.inner.supports_load_extension()
    }

    fn supports_top_before_distinct(&self) -> bool {
        self.inner.supports_top_before_distinct()
    }

    fn supports_boolean_literals(&self) -> bool {
        self.inner.supports_boolean_literals()
    }

    fn supports_show_like_before_in(&self) -> bool {
        self.inner.supports_show_like_before_in()
    }

    fn supports_comment_on(&self) -> bool {
        self.inner.supports_comment_on()
    }

    fn supports_create_table_select(&self) -> bool {
        self.inner.supports_create_table_select()
    }

    fn supports_leading_comma_before_table_options(&self) -> bool {
        self.inner.supports_leading_comma_before_table_options()
    }

    fn supports_partiql(&self) -> bool {
        self.inner.supports_partiql()
    }

    fn supports_unpivot_expr(&self) -> bool {
        self.inner.supports_unpivot_expr()
    }

    fn supports_constraint_keyword_without_name(&self) -> bool {
        self.inner.supports_constraint_keyword_without_name()
    }

    fn supports_key_column_option(&self) -> bool {
        self.inner.supports_key_column_option()
    }

    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        self.inner.is_reserved_for_identifier(kw)
    }

    fn get_reserved_keywords_for_select_item_operator(&self) -> &[Keyword] {
        self.inner.get_reserved_keywords_for_select_item_operator()
    }

    fn get_reserved_grantees_types(&self) -> &[GranteesType] {
        self.inner.get_reserved_grantees_types()
    }

    fn supports_table_sample_before_alias(&self) -> bool {
        self.inner.supports_table_sample_before_alias()
    }

    fn supports_insert_set(&self) -> bool {
        self.inner.supports_insert_set()
    }

    fn supports_insert_table_function(&self) -> bool {
        self.inner.supports_insert_table_function()
    }

    fn supports_insert_table_query(&self) -> bool {
        self.inner.supports_insert_table_query()
    }

    fn supports_insert_format(&self) -> bool {
        self.inner.supports_insert_format()
    }

    fn supports_insert_table_alias(&self) -> bool {
        self.inner.supports_insert_table_alias()
    }

    fn supports_set_stmt_without_operator(&self) -> bool {
        self.inner.supports_set_stmt_without_operator()
    }

    fn is_column_alias(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        self.inner.is_column_alias(kw, parser)
    }

    fn is_select_item_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        self.inner.is_select_item_alias(explicit, kw, parser)
    }

    fn is_table_factor(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        self.inner.is_table_factor(kw, parser)
    }

    fn is_table_alias(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        self.inner.is_table_alias(kw, parser)
    }

    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        self.inner.is_table_factor_alias(explicit, kw, parser)
    }

    fn supports_table_versioning(&self) -> bool {
        self.inner.supports_table_versioning()
    }

    fn supports_string_escape_constant(&self) -> bool {
        self.inner.supports_string_escape_constant()
    }

    fn supports_table_hints(&self) -> bool {
        self.inner.supports_table_hints()
    }

    fn requires_single_line_comment_whitespace(&self) -> bool {
        self.inner.requires_single_line_comment_whitespace()
    }

    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.inner.supports_array_typedef_with_brackets()
    }

    fn supports_geometric_types(&self) -> bool {
        self.inner.supports_geometric_types()
    }

    fn supports_order_by_all(&self) -> bool {
        self.inner.supports_order_by_all()
    }

    fn supports_order_by_using_operator(&self) -> bool {
        self.inner.supports_order_by_using_operator()
    }

    fn supports_set_names(&self) -> bool {
        self.inner.supports_set_names()
    }

    fn supports_space_separated_column_options(&self) -> bool {
        self.inner.supports_space_separated_column_options()
    }

    fn supports_alter_column_type_using(&self) -> bool {
        self.inner.supports_alter_column_type_using()
    }

    fn supports_comma_separated_drop_column_list(&self) -> bool {
        self.inner.supports_comma_separated_drop_column_list()
    }

    fn is_identifier_generating_function_name(
        &self,
        ident: &Ident,
        name_parts: &[ObjectNamePart],
    ) -> bool {
        self.inner
            .is_identifier_generating_function_name(ident, name_parts)
    }

    fn supports_notnull_operator(&self) -> bool {
        self.inner.supports_notnull_operator()
    }

    fn supports_data_type_signed_suffix(&self) -> bool {
        self.inner.supports_data_type_signed_suffix()
    }

    fn supports_interval_options(&self) -> bool {
        self.inner.supports_interval_options()
    }

    fn supports_create_table_like_parenthesized(&self) -> bool {
        self.inner.supports_create_table_like_parenthesized()
    }

    fn supports_semantic_view_table_factor(&self) -> bool {
        self.inner.supports_semantic_view_table_factor()
    }

    fn supports_quote_delimited_string(&self) -> bool {
        self.inner.supports_quote_delimited_string()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        self.inner.supports_comment_optimizer_hint()
    }

    fn supports_double_ampersand_operator(&self) -> bool {
        self.inner.supports_double_ampersand_operator()
    }

    fn supports_binary_kw_as_cast(&self) -> bool {
        self.inner.supports_binary_kw_as_cast()
    }

    fn supports_select_wildcard_replace(&self) -> bool {
        self.inner.supports_select_wildcard_replace()
    }

    fn supports_select_wildcard_ilike(&self) -> bool {
        self.inner.supports_select_wildcard_ilike()
    }

    fn supports_select_wildcard_rename(&self) -> bool {
        self.inner.supports_select_wildcard_rename()
    }

    fn supports_select_wildcard_with_alias(&self) -> bool {
        self.inner.supports_select_wildcard_with_alias()
    }

    fn supports_optimize_table(&self) -> bool {
        self.inner.supports_optimize_table()
    }

    fn supports_install(&self) -> bool {
        self.inner.supports_install()
    }

    fn supports_detach(&self) -> bool {
        self.inner.supports_detach()
    }

    fn supports_prewhere(&self) -> bool {
        self.inner.supports_prewhere()
    }

    fn supports_with_fill(&self) -> bool {
        self.inner.supports_with_fill()
    }

    fn supports_limit_by(&self) -> bool {
        self.inner.supports_limit_by()
    }

    fn supports_interpolate(&self) -> bool {
        self.inner.supports_interpolate()
    }

    fn supports_settings(&self) -> bool {
        self.inner.supports_settings()
    }

    fn supports_select_format(&self) -> bool {
        self.inner.supports_select_format()
    }

    fn supports_comma_separated_trim(&self) -> bool {
        self.inner.supports_comma_separated_trim()
    }

    fn supports_cte_without_as(&self) -> bool {
        self.inner.supports_cte_without_as()
    }

    fn supports_select_item_multi_column_alias(&self) -> bool {
        self.inner.supports_select_item_multi_column_alias()
    }

    fn supports_xml_expressions(&self) -> bool {
        self.inner.supports_xml_expressions()
    }

    fn supports_aliased_function_args(&self) -> bool {
        self.inner.supports_aliased_function_args()
    }

    fn supports_create_table_using(&self) -> bool {
        self.inner.supports_create_table_using()
    }

    fn supports_long_type_as_bigint(&self) -> bool {
        self.inner.supports_long_type_as_bigint()
    }

    fn supports_map_literal_with_angle_brackets(&self) -> bool {
        self.inner.supports_map_literal_with_angle_brackets()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::{
        AnsiDialect, BigQueryDialect, ClickHouseDialect, DatabricksDialect, DuckDbDialect,
        GenericDialect, HiveDialect, MsSqlDialect, MySqlDialect, PostgreSqlDialect,
        RedshiftSqlDialect, SQLiteDialect, SnowflakeDialect,
    };

    use crate::sqlspec::PARSER_RECURSION_LIMIT;

    fn dialects() -> [&'static dyn Dialect; 13] {
        [
            &SQLiteDialect {},
            &GenericDialect,
            &MySqlDialect {},
            &PostgreSqlDialect {},
            &AnsiDialect {},
            &SnowflakeDialect,
            &BigQueryDialect,
            &MsSqlDialect {},
            &ClickHouseDialect {},
            &DuckDbDialect,
            &RedshiftSqlDialect {},
            &HiveDialect {},
            &DatabricksDialect,
        ]
    }

    /// sqlparser's statements (or its error's text) for `sql` under `dialect`.
    fn parse(dialect: &dyn Dialect, sql: &str) -> Result<Vec<Statement>, String> {
        Parser::new(dialect)
            .with_recursion_limit(PARSER_RECURSION_LIMIT)
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_statements())
            .map_err(|e| e.to_string())
    }

    /// The wrapped dialect parses `sql` exactly as the dialect itself.
    fn same(dialect: &'static dyn Dialect, sql: &str) {
        assert_eq!(
            parse(&PlainPrefixes::new(dialect), sql),
            parse(dialect, sql),
            "{sql:?} in {dialect:?}"
        );
    }

    #[test]
    fn prefixes_sqlparser_guesses_at_parse_as_sqlparser_parses_them() {
        let cases = [
            "SELECT a, T1.b, t.c.d, 1, 2.5, 'x', \"q\", `b`, [c] FROM t AS T1",
            "SELECT xml 'a', XML 'b', xml FROM t",
            "SELECT xml 5, xml NULL, XML ?, xml.a 5 FROM t",
            "SELECT foo[] 'a', foo[1], a.b[2] FROM t",
            "SELECT a.b ARRAY 'x', a ARRAY[3] 'y', a ARRAY FROM t",
            "SELECT _utf8'abc', _utf8\"abc\", _binary X'ab', _x FROM t",
            "SELECT f(x), a.f(x), f (x), t.a(+) FROM t WHERE t.a(+) = u.b",
            "SELECT a -> a * 2, a INT -> a + 1, a => 1 FROM t",
            "SELECT a -> a * 2 FROM t",
            "SELECT transform(xs, x -> x + 1), filter(xs, x -> x > 0) FROM t",
            "SELECT DATE '2020-01-01', TIMESTAMP '2020-01-01 00:00', INTERVAL '1' DAY, date FROM t",
            "SELECT x FROM t WHERE y = 'a' 'b' AND z = N'n' AND w = E'e' AND v = 5 'x'",
            "SELECT t.x::int, x::text, 'a'::date, 1::int FROM t",
            "SELECT a b, a AS b, a FROM t WHERE a IN (1, 2) AND b IS NULL AND c LIKE 'x%'",
            "SELECT a.b.c.d.e FROM a.b.c WHERE a.b = a.\"b\" AND a.* IS NOT NULL",
            "SELECT a.b(c) FROM t WHERE a.b.c(d) > 1",
            "SELECT CASE x WHEN 1 THEN y ELSE z END, CAST(a AS REAL), COUNT(*), SUM(b) FROM t",
            "SELECT ",
            "SELECT a FROM",
            "SELECT 'unterminated",
            "SELECT a.",
            "SELECT 1 +",
            "SELECT a . b FROM t",
            "SELECT a, FROM t",
            "SELECT a[",
            "SELECT a(",
            "SELECT @a, :b, ?, $1 FROM t",
            "SELECT x'ab', b'01', r'raw', 0x1F, 1e5, .5 FROM t",
            "SELECT map['a'], struct(1), array[1, 2], point '(1,2)', circle '((0,0),1)' FROM t",
            "SELECT current_user, session_user, user, current_date, localtime FROM t",
            "SELECT COUNT(*), count(DISTINCT a), SUM(t.b), avg(1), min('x'), MAX(a, b, 2) FROM t",
            "SELECT iif(a, 1, 0), strftime('%Y', d), f(), f(a,), f(a b), f(a = 1), f(a => 1) FROM t",
            "SELECT count(x) OVER (PARTITION BY y), count(x) OVER w, sum(x) FILTER (WHERE y) FROM t",
            "SELECT count(x) WITHIN GROUP (ORDER BY y), f(x) IGNORE NULLS, f(x) RESPECT NULLS FROM t",
            "SELECT f(x)(y), f(x)[1], f(x)[] 'a', f(x) ARRAY, f(x).y, f(x)::int, f(x) 'a' FROM t",
            "SELECT f(x) OVER (, count(a.) , sum(SELECT 1), f(DISTINCT), f(*, a), f(a.*) FROM t",
            "SELECT xml(a), xmlparse(a), t.a(+), \"f\"(a), [f](a), `f`(a), f(\"a\".b) FROM t",
            "SELECT count(a.b.c), f(-1), f(+1), f(1.5), f('a''b'), f(NULL), f(TRUE) FROM t",
        ];
        // Nesting beyond the parser's limit fails alike on both sides.
        let deep = format!(
            "SELECT {}a{} FROM t",
            "(".repeat(PARSER_RECURSION_LIMIT + 10),
            ")".repeat(PARSER_RECURSION_LIMIT + 10)
        );
        let deep_literal = format!(
            "SELECT {}1{} FROM t",
            "(".repeat(PARSER_RECURSION_LIMIT + 10),
            ")".repeat(PARSER_RECURSION_LIMIT + 10)
        );
        for dialect in dialects() {
            for sql in cases
                .iter()
                .copied()
                .chain([deep.as_str(), deep_literal.as_str()])
            {
                same(dialect, sql);
            }
        }
    }

    #[test]
    fn every_sql_text_of_the_shared_data_parses_as_sqlparser_parses_it() {
        let mut texts = crate::shared_data::texts(
            &[
                "bird/dev.jsonl",
                "spider/dev.jsonl",
                "bird/predictions/CHESS-GPT-4o-mini.jsonl",
                "bird/predictions/DAIL-SQL.jsonl",
                "bird/predictions/SuperSQL.jsonl",
                "spider/predictions/DAIL-SQL-GPT-4.jsonl",
                "spider/predictions/SuperSQL.jsonl",
                "spider/predictions/TA-ACL.jsonl",
                "labels/nl2sql-bugs-dev.jsonl",
                "labels/nl2sql-bugs-toxicology.jsonl",
                "labels/rose-vec-bird-dev.jsonl",
            ],
            &["gold_sql", "query", "predicted_sql", "sql"],
        );
        texts.sort();
        texts.dedup();
        // Every text with the dialects BIRD and Spider are written in and the default one;
        // every seventh with the others (the debug build parses ~2,000 texts a second).
        for (i, dialect) in dialects().into_iter().enumerate() {
            let step = if i < 4 { 1 } else { 7 };
            for sql in texts.iter().step_by(step) {
                same(dialect, sql);
            }
        }
    }
}

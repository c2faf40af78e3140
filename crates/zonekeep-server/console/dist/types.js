// The admin API's answers, as the console reads them (crates/zonekeep-server/src/admin/mod.rs lists
// the routes). Fields a host may leave out are optional.
export {};

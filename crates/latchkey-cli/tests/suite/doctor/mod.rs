//! `latchkey doctor`: safe and unsafe servers, managed services' refusals,
//! the user it advises, ACL users and the fixes it prints.

mod acl;
mod basics;
mod managed;
mod users;

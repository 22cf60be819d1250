//! OpenRTB 2.6 bid requests and responses.

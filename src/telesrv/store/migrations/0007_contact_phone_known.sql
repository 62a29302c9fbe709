-- Whether the owner saved the contact by its phone number (contacts.importContacts, or
-- contacts.addContact naming the right number). Such an owner already has the number
-- and may be shown it; one who added the contact by id or username may not, unless
-- the contact has the owner in their own contacts. Rows from before are unknown: false.
ALTER TABLE contacts ADD COLUMN saved_by_phone boolean NOT NULL DEFAULT false;
